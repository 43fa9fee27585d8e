"""init_local_ray tries again only when Ray's node timed out during start-up."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from saintpipe.core.ray_cluster import init_local_ray


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


def test_a_gcs_that_did_not_publish_its_port_in_time_is_tried_again(monkeypatch):
    # As seen in a full test run: the GCS of a new node did not write its port file within Ray's 30 s.
    calls = _fake_ray(monkeypatch, [RuntimeError(
        "Timed out waiting for file /tmp/ray/session_2026-11-29_05-55-43_478665_2474/gcs_server_port_4e58")])
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


def test_the_processes_of_a_failed_attempt_are_stopped_before_the_next_and_only_rays(monkeypatch, tmp_path):
    import subprocess

    # A script inside a folder named ray, as Ray's own processes are (its package's binaries and scripts).
    script = tmp_path / "ray" / "gcs.py"
    script.parent.mkdir()
    script.write_text("import time; time.sleep(120)")
    started: list[subprocess.Popen] = []
    others: list[subprocess.Popen] = []

    def init(**kwargs):
        # A real child, as Ray's GCS and monitors are; the first attempt times out with it running, while
        # something else (Redis, a feature shard, started on another thread) starts beside it.
        started.append(subprocess.Popen([sys.executable, str(script)]))
        if len(started) == 1:
            others.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
            raise Exception("The current node timed out during startup.")

    monkeypatch.setitem(sys.modules, "ray", SimpleNamespace(init=init, shutdown=lambda: None))
    try:
        init_local_ray(attempts=2, pause_s=0)
        assert started[0].wait(10) is not None  # the failed attempt's process is gone
        assert started[1].poll() is None  # the running attempt's is not
        assert others[0].poll() is None  # nor a process that is not Ray's
    finally:
        for proc in started + others:
            proc.kill()
            proc.wait()


def test_starting_a_local_cluster_drops_ray_s_token_notice_and_only_that_and_only_then():
    import logging

    from saintpipe.core.ray_cluster import _TOKEN_NOTICE_LOGGER, _quiet_token_notice

    notice = logging.getLogger(_TOKEN_NOTICE_LOGGER)
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    notice.addHandler(handler)
    try:
        with _quiet_token_notice():
            notice.warning("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled ...")
            notice.warning("Token authentication is disabled for this Ray cluster. Anyone with network access ...")
        notice.warning("Token authentication is enabled for this Ray cluster. (another start)")
    finally:
        notice.removeHandler(handler)
    assert seen == ["Token authentication is disabled for this Ray cluster. Anyone with network access ...",
                    "Token authentication is enabled for this Ray cluster. (another start)"]


def test_a_local_cluster_s_processes_retry_their_raylet_connection_closer_together(monkeypatch):
    import os

    from saintpipe.core.ray_cluster import LOCAL_RAY_ENV, connect_ray

    seen: list[dict[str, str | None]] = []
    names = list(LOCAL_RAY_ENV)
    for name in names:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(names[0], "7")  # the user's own value stays

    def init(**kwargs):
        seen.append({name: os.environ.get(name) for name in names})

    monkeypatch.setitem(sys.modules, "ray", SimpleNamespace(init=init, shutdown=lambda: None,
                                                            is_initialized=lambda: False))
    assert connect_ray("local", num_cpus=2)
    # Set before Ray's processes start (they inherit them), with the same 10 s in all as Ray's defaults.
    assert seen == [{names[0]: "7", names[1]: LOCAL_RAY_ENV[names[1]]}]
    assert int(LOCAL_RAY_ENV[names[0]]) * int(LOCAL_RAY_ENV[names[1]]) == 10 * 1000
