"""init_local_ray tries again only when Ray's node timed out during start-up."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from saintpipe.pipeline.ray_start import init_local_ray


def _fake_ray(monkeypatch, failures: list[Exception]) -> list[str]:
    calls: list[str] = []

    def init(**kwargs):
        calls.append("init")
        if failures:
            raise failures.pop(0)

    monkeypatch.setitem(sys.modules, "ray", SimpleNamespace(init=init, shutdown=lambda: calls.append("shutdown")))
    return calls


def test_a_startup_timeout_is_tried_again_after_a_shutdown(monkeypatch):
    calls = _fake_ray(monkeypatch, [Exception("The current node timed out during startup. ...")])
    init_local_ray(attempts=3, pause_s=0, num_cpus=2)
    assert calls == ["init", "shutdown", "init"]


def test_other_errors_and_the_last_attempt_are_raised(monkeypatch):
    calls = _fake_ray(monkeypatch, [ValueError("bad address")])
    with pytest.raises(ValueError, match="bad address"):
        init_local_ray(attempts=3, pause_s=0)
    assert calls == ["init"]
    calls = _fake_ray(monkeypatch, [Exception("timed out during startup")] * 2)
    with pytest.raises(Exception, match="timed out during startup"):
        init_local_ray(attempts=2, pause_s=0)
    assert calls == ["init", "shutdown", "init"]
