"""The supervisor's bookkeeping: counts across restarts, failures, restarts and back-off."""

from __future__ import annotations

import pytest

from saintpipe.services.sampler_service.counters import WorkerCounters
from saintpipe.services.sampler_service.slots import BACKOFF_MAX_S, RESTART_POLL_S, WorkerSlot


def _counts(n: int) -> WorkerCounters:
    c = WorkerCounters()
    for _ in range(n):
        c.observe(10, 20, 0.001, 0.0)
    return c


def test_counts_survive_a_new_incarnation():
    slot = WorkerSlot(0)
    slot.observe_counters(100, _counts(5))
    slot.observe_counters(100, _counts(7))
    assert slot.total.subgraphs == 7
    slot.observe_counters(200, _counts(2))  # restarted: the new process counts from zero
    assert slot.total.subgraphs == 9 and slot.total.nodes == 90
    slot.observe_counters(200, _counts(3))
    assert slot.total.subgraphs == 10


def test_exceptions_back_off_and_progress_resets_the_failure_streak():
    slot = WorkerSlot(0)
    slot.observe_counters(1, _counts(0))
    for _ in range(12):
        assert slot.record_failure("boom", "exception", now=0.0)
    assert 0 < slot.retry_at == BACKOFF_MAX_S
    assert slot.restarts == 12 and slot.consecutive_failures == 12 and slot.last_error == "boom"
    slot.observe_counters(1, _counts(0))
    assert slot.consecutive_failures == 12  # nothing pushed yet
    slot.observe_counters(1, _counts(1))
    assert slot.consecutive_failures == 0 and slot.restarts == 12


def test_one_death_is_one_restart_however_often_the_restarting_actor_is_unavailable():
    slot = WorkerSlot(0)
    slot.observe_counters(100, _counts(3))
    assert slot.record_failure("killed", "unavailable", now=5.0)
    assert slot.retry_at == 5.0 + RESTART_POLL_S
    assert not slot.record_failure("still restarting", "unavailable", now=5.2)
    assert not slot.record_failure("still restarting", "unavailable", now=5.4)
    assert slot.restarts == 1
    slot.observe_counters(101, _counts(0))  # the new process reports: it is back
    assert not slot.restarting
    assert slot.record_failure("killed again", "unavailable", now=9.0)
    assert slot.restarts == 2
    assert slot.record_failure("gone", "died", now=10.0) and not slot.restarting
    assert slot.restarts == 3


def _place(slot: WorkerSlot, host: str, node_id: str) -> None:
    """What the supervisor records once it asked the current incarnation where it runs."""
    slot.host, slot.node_id, slot.placed_pid = host, node_id, slot.pid


def test_placement_is_stale_until_the_reporting_incarnation_is_placed():
    slot = WorkerSlot(0)
    assert not slot.placement_stale  # no actor yet
    slot.worker = object()
    assert not slot.placement_stale  # started, nothing reported: nothing to ask yet
    slot.observe_counters(100, _counts(1))
    assert slot.placement_stale
    _place(slot, "samplers", "a" * 56)
    assert not slot.placement_stale
    slot.observe_counters(100, _counts(4))  # the same process keeps reporting: still where it was
    assert not slot.placement_stale and slot.host == "samplers"


def test_a_new_incarnation_makes_the_placement_stale_again():
    slot = WorkerSlot(0, worker=object())
    slot.observe_counters(100, _counts(3))
    _place(slot, "sampler-node", "b" * 56)
    # Its node is lost: the death forgets which process was placed, so the restarted one is asked where it
    # runs even if it has the old pid (pids repeat across hosts) ...
    assert slot.record_failure("node died", "unavailable", now=1.0)
    assert not slot.record_failure("still restarting", "unavailable", now=1.2)
    assert not slot.placement_stale and slot.host == "sampler-node"  # not asked while Ray restarts it
    slot.observe_counters(101, _counts(0))
    assert slot.placement_stale and slot.host == "sampler-node"  # the last known place, until asked
    # ... while an exception inside run() leaves the process, and its place, as they were.
    _place(slot, "sampler-node", "b" * 56)
    assert slot.record_failure("boom", "exception", now=2.0)
    assert not slot.placement_stale
    slot.observe_counters(7, _counts(0))
    assert slot.placement_stale and slot.host == "sampler-node"
    _place(slot, "samplers", "a" * 56)
    assert not slot.placement_stale and (slot.host, slot.placed_pid) == ("samplers", 7)


def test_a_slot_without_an_actor_is_never_stale():
    # A removed worker (or one being replaced) has no handle to ask.
    slot = WorkerSlot(2, worker=object())
    slot.observe_counters(100, _counts(1))
    assert slot.placement_stale
    slot.worker = None
    assert not slot.placement_stale
    # Added again on the same index: the new process's first report asks anew.
    slot.pid, slot.worker = None, object()
    assert not slot.placement_stale
    slot.observe_counters(200, _counts(0))
    assert slot.placement_stale


def test_process_of_fills_the_lowest_process_first():
    from saintpipe.services.sampler_service.slots import process_of

    assert [process_of(i, 1) for i in range(4)] == [0, 1, 2, 3]
    assert [process_of(i, 2) for i in range(5)] == [0, 0, 1, 1, 2]
    assert [process_of(i, 3) for i in range(7)] == [0, 0, 0, 1, 1, 1, 2]
    with pytest.raises(ValueError, match="per_process"):
        process_of(0, 0)


def test_threads_cpu_counts_only_the_threads_that_entered():
    import threading
    import time

    from saintpipe.services.sampler_service.production import ThreadsCpu

    def spin(seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    clock = ThreadsCpu()
    other = threading.Thread(target=spin, args=(0.2,))  # never entered: not counted
    other.start()
    clock.enter()
    spin(0.1)
    live = clock.seconds()
    assert 0.09 <= live < 0.18
    clock.leave()
    other.join()
    ended = clock.seconds()
    assert ended >= live and ended < 0.18  # what it spent stays counted after it left
    spin(0.05)
    assert clock.seconds() == ended  # after leaving, this thread's time is no longer added
