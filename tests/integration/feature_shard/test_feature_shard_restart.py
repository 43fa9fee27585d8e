"""Clients ride through a shard restart: a shard process is SIGKILLed while gathers run in a loop, and
every gather still returns the right rows. The servers are real subprocesses (LocalShards), killed for
real and restarted on the same port, as the local runner does."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from feature_shard_helpers import NUM_NODES, NUM_SHARDS

from saintpipe.core.errors import ServiceUnavailable
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.launch import LocalShards

pytestmark = pytest.mark.faults  # part of the fault suite (docs/how-to/faults.md)

SLACK = 3.0  # scheduling slack on a busy machine
RECOVERY = 5.0  # a gather must succeed this soon after the server listens again (measured: ~0.2-1.2 s)


class GatherLoop:
    """Gathers random ids in a thread until stopped; records (start, end, error or None) per gather."""

    def __init__(self, client: FeatureClient, full_matrix: np.ndarray, seed: int = 0) -> None:
        self.client, self.full = client, full_matrix
        self.rng = np.random.default_rng(seed)
        self.done: list[tuple[float, float, BaseException | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gather-loop", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            ids = self.rng.integers(0, NUM_NODES, 400)  # every shard, duplicates, any order
            began = time.monotonic()
            try:
                rows = self.client.gather(ids)
                error = None if np.array_equal(rows, self.full[ids]) else AssertionError("wrong rows")
            except BaseException as exc:  # noqa: BLE001 - recorded, asserted on by the test
                error = exc
            self.done.append((began, time.monotonic(), error))

    def wait_for(self, count: int, after: float = 0.0, timeout: float = 60.0) -> None:
        """Until ``count`` gathers finished after time ``after``."""
        give_up = time.monotonic() + timeout
        while sum(end > after for _, end, _ in self.done) < count:
            assert time.monotonic() < give_up, f"only {len(self.done)} gathers in {timeout} s"
            assert self._thread.is_alive()
            time.sleep(0.01)

    @property
    def errors(self) -> list[BaseException]:
        return [e for _, _, e in self.done if e is not None]

    def __enter__(self) -> "GatherLoop":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(120)


def test_restart_starts_a_replica_again_on_its_port_from_any_thread(feature_dataset, full_matrix):
    with LocalShards(feature_dataset, NUM_SHARDS) as shards:
        old = shards.processes[2][0]
        address = old.address
        new = shards.restart(2)  # still running: stopped gracefully first
        assert old.process.returncode == 0 and new.process.pid != old.process.pid
        assert new is shards.processes[2][0] and new.address == address and shards.addresses[2] == [address]
        # From a thread that ends at once: the shard must outlive it (its parent-death signal follows
        # the thread that spawned it, and that is LocalShards' own launcher thread).
        started: list = []
        helper = threading.Thread(target=lambda: started.append(shards.restart(2, 0)))
        helper.start()
        helper.join(60)
        time.sleep(1.0)
        assert started[0].process.poll() is None and started[0].address == address
        with FeatureClient(shards.addresses, shared_memory="off", security=shards.client_security()) as client:
            ids = np.arange(NUM_NODES)
            np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])


@pytest.mark.parametrize("shared_memory", ["auto", "off"])
def test_gathers_ride_through_a_restart_of_a_shard_without_replicas(
    feature_dataset, full_matrix, shared_memory
):
    with LocalShards(feature_dataset, NUM_SHARDS) as shards:
        address = shards.addresses[1][0]
        with FeatureClient(
            shards.addresses, deadline=5.0, retry_deadline_s=30.0, shared_memory=shared_memory,
            security=shards.client_security(),
        ) as c:
            shm_on = c.shared_memory_active
            with GatherLoop(c, full_matrix) as loop:
                loop.wait_for(10)
                victim = shards.processes[1][0]
                victim.stop(kill=True)  # SIGKILL: no goodbye to its clients
                killed_at = time.monotonic()
                time.sleep(2.0)
                new = shards.restart(1, 0)
                back_at = time.monotonic()
                shm_before = c.stats()["shm_bytes"]
                loop.wait_for(20, after=back_at)
            assert new.address == address
            assert loop.errors == [], loop.errors[:3]
            # Some gather was held across the outage and finished after the server came back.
            held = [(s, e) for s, e, _ in loop.done if s < back_at - 1.0 and e > back_at]
            assert held, "no gather waited for the restart"
            recovered_at = min(e for _, e, _ in loop.done if e > back_at)
            print(
                f"\nshared_memory={shared_memory}: down {back_at - killed_at:.2f} s, first gather "
                f"{recovered_at - back_at:.3f} s after the server listened again"
            )
            assert recovered_at - back_at < RECOVERY
            assert c.stats()["retries"] >= 1
            if shm_on:  # the restarted server opens the client's region again; the client keeps using it
                assert c.shared_memory_active and all(r.shm for r in c._shards[1].replicas)
                assert c.stats()["shm_bytes"] > shm_before


def test_gathers_fail_over_to_a_replica_while_the_other_stays_dead(feature_dataset, full_matrix):
    with LocalShards(feature_dataset, NUM_SHARDS, replicas=2) as shards:
        security = shards.client_security()
        with FeatureClient(shards.addresses, deadline=5.0, retry_deadline_s=30.0, security=security) as c:
            with GatherLoop(c, full_matrix, seed=1) as loop:
                loop.wait_for(10)
                shards.processes[1][0].stop(kill=True)  # replica 0 is the one tried first; never restarted
                killed_at = time.monotonic()
                loop.wait_for(30, after=killed_at)
            assert loop.errors == [], loop.errors[:3]
            stats = c.stats()
            assert stats["failovers"] >= 1 and stats["retries"] == 0  # the other replica answered at once


def test_a_shard_that_never_comes_back_is_a_clear_error_within_the_retry_deadline(
    feature_dataset, full_matrix
):

    retry = 3.0
    with LocalShards(feature_dataset, NUM_SHARDS) as shards:
        address = shards.addresses[1][0]
        security = shards.client_security()
        with FeatureClient(shards.addresses, deadline=1.0, retry_deadline_s=retry, security=security) as c:
            ids = np.arange(NUM_NODES)
            np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
            shards.processes[1][0].stop(kill=True)
            began = time.monotonic()
            with pytest.raises(ServiceUnavailable) as err:
                c.gather(ids)
            elapsed = time.monotonic() - began
            assert retry - 0.2 <= elapsed < retry + SLACK  # it kept trying until the retry deadline
            message = str(err.value)
            assert message.startswith("feature shard 1 [") and address in message
            assert f"the {retry:g} s retry deadline ran out" in message
            # The other shards still answer for their own ranges.
            start1, stop1 = c.shard_ranges[1]
            others = np.array([0, start1 - 1, stop1, NUM_NODES - 1])
            np.testing.assert_array_equal(c.gather(others), full_matrix[others])
