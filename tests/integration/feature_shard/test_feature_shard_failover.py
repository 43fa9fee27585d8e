"""Replicas, dead shards and hung shards: answers continue while a replica lives, and
otherwise a clear error arrives within the deadline. The servers are real subprocesses,
killed for real."""

from __future__ import annotations

import os
import signal
import socket
import time

import numpy as np
import pytest
from feature_shard_helpers import NUM_NODES, freeze

from saintpipe.core.errors import SaintpipeTimeout, ServiceUnavailable
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.launch import ShardProcess

DEADLINE = 2.0
SLACK = 2.0  # scheduling slack on a busy machine; the point is "no hang", not speed


@pytest.fixture
def processes(feature_dataset):
    """Shard 0 with two replicas, shards 1 and 2 with one each."""
    started: list[ShardProcess] = []
    try:
        for k in (0, 0, 1, 2):
            started.append(ShardProcess(feature_dataset, k, wait=False))
        for p in started:
            p.wait_ready()
        yield started
    finally:
        for p in started:
            if p.process.poll() is None:
                os.kill(p.process.pid, signal.SIGCONT)
            p.stop(kill=True)


def _elapsed_raising(fn, error: type[Exception]) -> tuple[float, Exception]:
    """Run ``fn``, which must raise ``error``; return (seconds it took, the error)."""
    began = time.monotonic()
    with pytest.raises(error) as caught:
        fn()
    return time.monotonic() - began, caught.value


def test_killed_replica_fails_over_then_errors_clearly(processes, full_matrix):
    a0, b0, s1, s2 = processes
    shards = [[a0.address, b0.address], [s1.address], [s2.address]]
    ids = np.random.default_rng(0).integers(0, NUM_NODES, 1500)
    with FeatureClient(shards, deadline=DEADLINE, retries=2) as client:
        np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])

        a0.process.send_signal(signal.SIGKILL)  # the preferred replica of shard 0 dies
        a0.process.wait()
        for _ in range(3):
            np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
        assert client.stats()["failovers"] >= 1

        freeze(b0.process)  # the live one hangs: a timeout, not a hang
        elapsed, err = _elapsed_raising(lambda: client.gather(ids), SaintpipeTimeout)
        assert elapsed < DEADLINE + SLACK
        assert f"feature shard 0 at {b0.address}" in str(err)

        b0.process.send_signal(signal.SIGKILL)  # no replica left
        b0.process.wait()
        elapsed, err = _elapsed_raising(lambda: client.gather(ids), ServiceUnavailable)
        assert elapsed < DEADLINE + SLACK
        message = str(err)
        assert "feature shard 0" in message and a0.address in message and b0.address in message

        # Shards 1 and 2 still answer for their own ranges.
        start1 = client.shard_ranges[1][0]
        np.testing.assert_array_equal(
            client.gather(np.array([start1, NUM_NODES - 1])), full_matrix[[start1, NUM_NODES - 1]]
        )


def test_no_replica_at_start_is_a_clear_error(shard_addresses):
    dead = []
    for _ in range(2):  # ports nobody listens on
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            dead.append(f"127.0.0.1:{sock.getsockname()[1]}")
    shards = [dead, *shard_addresses[1:]]
    elapsed, err = _elapsed_raising(
        lambda: FeatureClient(shards, deadline=DEADLINE, retry_deadline_s=DEADLINE), ServiceUnavailable
    )
    assert elapsed < DEADLINE + SLACK
    assert "feature shard 0: no replica answered Info" in str(err)
    assert dead[0] in str(err) and dead[1] in str(err)
