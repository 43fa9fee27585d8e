"""The supervisor's bookkeeping: counts across restarts, failures, restarts and back-off."""

from __future__ import annotations

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
