"""Failover and retries across a shard's replicas: the two time limits, without servers."""

from __future__ import annotations

import time

import grpc
import pytest

from saintpipe.core.errors import InvalidArgument, SaintpipeTimeout, ServiceUnavailable
from saintpipe.services.feature_shard.replicas import Budget, Replica, Shard, with_failover


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str = "connection refused") -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def _shard(*addresses: str) -> Shard:
    return Shard(0, [Replica(a, None, None, None, None, None, None) for a in addresses])


class Counts(dict):
    def __call__(self, **amounts: int) -> None:
        for key, value in amounts.items():
            self[key] = self.get(key, 0) + value


def test_a_restarting_shard_is_retried_past_the_deadline_until_it_answers():
    shard = _shard("a:1")
    back_at = time.monotonic() + 0.6  # "restarts" for longer than the 0.2 s deadline
    timeouts: list[float] = []

    def call(replica: Replica, timeout: float) -> str:
        timeouts.append(timeout)
        if time.monotonic() < back_at:
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE)
        return "rows"

    counts = Counts()
    assert with_failover(shard, call, Budget.start(0.2, 5.0), "Gather", retries=None, count=counts) == "rows"
    assert counts["retries"] >= 3 and counts["failovers"] == len(timeouts) - 1
    # Once the shard was unreachable, every call gets one full deadline (never the few ms left of it).
    assert all(t == pytest.approx(0.2, abs=0.01) for t in timeouts[1:])


def test_the_retry_deadline_ends_it_with_the_shard_and_its_addresses():
    shard = _shard("a:1", "b:2")
    began = time.monotonic()

    def call(replica: Replica, timeout: float) -> str:
        raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, f"{replica.address} refused")

    with pytest.raises(ServiceUnavailable) as err:
        with_failover(shard, call, Budget.start(0.1, 0.5), "Gather", retries=None, count=Counts())
    assert 0.45 < time.monotonic() - began < 1.0
    message = str(err.value)
    assert message.startswith("feature shard 0: no replica answered Gather (a:1, b:2)")
    assert (
        "the 0.5 s retry deadline ran out" in message
        and "a:1 refused" in message
        and "b:2 refused" in message
    )


def test_a_deadline_hit_on_the_retry_windows_last_moments_is_the_window_running_out():
    # Seen in CI: the last round's call got 14 us of the retry window, and its DEADLINE_EXCEEDED was reported as
    # a replica too slow to answer instead of a shard no replica of which answered in time.
    calls: list[float] = []

    def call(replica: Replica, timeout: float) -> str:
        calls.append(timeout)
        if len(calls) == 1:
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE, "refused")
        raise FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline")

    budget = Budget.start(1.0, 60.0)
    budget = Budget(budget.deadline, budget.retry_deadline, budget.deadline_at, time.monotonic() + 0.3)
    refused = r"no replica answered Info \(a:1\) after 2 attempts .* ran out: a:1: refused"
    with pytest.raises(ServiceUnavailable, match=refused):
        with_failover(_shard("a:1"), call, budget, "Info", retries=None, count=Counts())
    assert calls[-1] < 1.0


def test_retries_still_cap_the_rounds_and_a_closed_client_stops_at_once():
    def call(replica: Replica, timeout: float) -> str:
        raise FakeRpcError(grpc.StatusCode.UNAVAILABLE)

    with pytest.raises(ServiceUnavailable, match="after 3 attempts and 2 retries"):
        with_failover(_shard("a:1"), call, Budget.start(1.0, 60.0), "Gather", retries=2, count=Counts())
    began = time.monotonic()
    with pytest.raises(ServiceUnavailable, match="the client was closed"):
        with_failover(
            _shard("a:1"),
            call,
            Budget.start(1.0, 60.0),
            "Gather",
            retries=None,
            count=Counts(),
            closed=lambda: True,
        )
    assert time.monotonic() - began < 0.5


def test_failover_to_the_next_replica_is_immediate_and_remembered():
    shard = _shard("dead:1", "live:2")
    tried: list[str] = []

    def call(replica: Replica, timeout: float) -> str:
        tried.append(replica.address)
        if replica.address == "dead:1":
            raise FakeRpcError(grpc.StatusCode.UNAVAILABLE)
        return replica.address

    counts = Counts()
    assert (
        with_failover(shard, call, Budget.start(1.0, 60.0), "Gather", retries=None, count=counts) == "live:2"
    )
    assert (
        with_failover(shard, call, Budget.start(1.0, 60.0), "Gather", retries=None, count=counts) == "live:2"
    )
    assert tried == ["dead:1", "live:2", "live:2"] and counts == {"failovers": 1}


def test_other_failures_are_not_retried():
    def hung(replica: Replica, timeout: float) -> str:
        raise FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline")

    def refused(replica: Replica, timeout: float) -> str:
        raise FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "node id 7 is bad")

    with pytest.raises(SaintpipeTimeout, match="feature shard 0 at a:1: Gather did not finish"):
        with_failover(_shard("a:1"), hung, Budget.start(1.0, 60.0), "Gather", retries=None, count=Counts())
    with pytest.raises(InvalidArgument, match="node id 7 is bad"):
        with_failover(_shard("a:1"), refused, Budget.start(1.0, 60.0), "Gather", retries=None, count=Counts())


def test_budget_timeouts():
    budget = Budget.start(2.0, 10.0)
    assert budget.timeout(retrying=False) == pytest.approx(2.0, abs=0.05)
    assert budget.timeout(retrying=True) == pytest.approx(2.0, abs=0.05)
    short = Budget.start(2.0, 0.0)  # a retry deadline below the deadline: the deadline holds
    assert short.retry_until == short.deadline_at
