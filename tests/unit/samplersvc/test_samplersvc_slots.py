"""The supervisor's bookkeeping: counts across restarts, failures and back-off."""

from __future__ import annotations

from services.sampler_service.counters import WorkerCounters
from services.sampler_service.slots import BACKOFF_MAX_S, WorkerSlot


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


def test_failures_back_off_and_progress_resets_them():
    slot = WorkerSlot(0)
    retry = [slot.record_failure("boom", died=False, now=0.0) for _ in range(12)]
    assert retry[0] < retry[1] < retry[2] and retry[-1] == BACKOFF_MAX_S
    assert slot.restarts == 12 and slot.consecutive_failures == 12 and slot.last_error == "boom"
    assert slot.record_failure("killed", died=True, now=5.0) == 5.0  # Ray restarts a dead process at once
    assert slot.deaths_on_actor == 1
    slot.observe_counters(1, _counts(0))
    assert slot.consecutive_failures == 13  # nothing pushed yet
    slot.observe_counters(1, _counts(1))
    assert slot.consecutive_failures == 0 and slot.restarts == 13
