"""Poison pills: garbage XADDed by hand into a running job's stream is dead-lettered and training goes on."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import redis

from tests.support.faults import assert_accounted, assert_completed_like

pytestmark = pytest.mark.faults


def private_redis_of(run) -> redis.Redis:
    """A client of the run's private Redis (its port and password from the config file in its directory)."""
    server = run.child("redis-server")
    # redis-server works in its data directory, which is its config's directory or a folder in it.
    cwd = Path(server.cwd())
    conf = next(c for c in (cwd / "redis.conf", cwd.parent / "redis.conf") if c.exists())
    text = conf.read_text()
    port = int(re.search(r"^port (\d+)$", text, re.M).group(1))
    password = re.search(r"^requirepass (\S+)$", text, re.M).group(1)
    return redis.Redis(host="127.0.0.1", port=port, password=password)


def test_garbage_entries_are_dead_lettered_with_a_reason_and_training_goes_on(fault_run, undisturbed):
    run = fault_run().training()
    client = private_redis_of(run)
    stream = "saintpipe:pool:{local}:stream"
    client.set("saintpipe:pool:{local}:sg:garbage", os.urandom(4096))
    client.xadd(stream, {"k": "saintpipe:pool:{local}:sg:garbage"})
    client.xadd(stream, {"k": "saintpipe:pool:{local}:sg:never-written"})
    client.xadd(stream, {"nonsense": "no k field at all"})
    code = run.finish()
    assert code == 0, run.output()
    summary = run.summary()
    assert_completed_like(summary, undisturbed, run)
    account = assert_accounted(summary, foreign=3)
    assert account["dead_lettered"] == 3, account
    reasons = "\n".join(account["dead_letters"])
    assert reasons.count("missing") >= 2 and len(account["dead_letters"]) == 3, reasons
    assert "Traceback" not in run.stderr, run.output()
    assert run.left_behind() == []
