"""The per-peer rate limiter of the shard servers' failure log, and the log lines it lets through."""

from __future__ import annotations

import logging

import grpc
import pytest

from saintpipe.core.errors import InvalidArgument
from saintpipe.core.grpc_status import MAX_DETAILS, one_line
from saintpipe.services.feature_shard.lograte import FailureLog, RateLimiter, peer_host


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_event_per_key_per_interval_and_the_count_of_the_rest():
    clock = Clock()
    limiter = RateLimiter(10.0, clock=clock)
    assert limiter.allow("a") == 0  # the first is allowed, nothing held back before it
    assert [limiter.allow("a") for _ in range(5)] == [None] * 5
    assert limiter.allow("b") == 0  # another key has its own budget
    clock.now += 9.9
    assert limiter.allow("a") is None
    clock.now += 0.1  # 10 s after the last allowed one
    assert limiter.allow("a") == 6  # 5 + 1 held back since
    assert limiter.allow("a") is None
    clock.now += 60
    assert limiter.allow("a") == 1
    assert limiter.allow("b") == 0


def test_memory_is_bounded_by_forgetting_the_least_recently_seen_key():
    clock = Clock()
    limiter = RateLimiter(10.0, max_keys=3, clock=clock)
    for key in "abc":
        assert limiter.allow(key) == 0
    assert limiter.allow("a") is None  # "a" is now the most recently seen
    assert limiter.allow("d") == 0  # evicts "b"
    assert len(limiter) == 3
    assert limiter.allow("b") == 0  # forgotten: allowed again at once
    assert limiter.allow("a") is None  # remembered
    for i in range(1000):
        limiter.allow(f"peer{i}")
    assert len(limiter) == 3


def test_interval_zero_allows_everything_and_bad_arguments_are_refused():
    limiter = RateLimiter(0.0)
    assert [limiter.allow("a") for _ in range(3)] == [0, 0, 0]
    with pytest.raises(ValueError):
        RateLimiter(-1.0)
    with pytest.raises(ValueError):
        RateLimiter(1.0, max_keys=0)


@pytest.mark.parametrize(
    "peer, host",
    [
        ("ipv4:127.0.0.1:54321", "ipv4:127.0.0.1"),
        ("ipv6:[::1]:54321", "ipv6:[::1]"),
        ("unix:/tmp/sock", "unix:/tmp/sock"),
        ("", ""),
    ],
)
def test_peer_host_drops_the_port(peer, host):
    assert peer_host(peer) == host


class FakeContext:
    def __init__(self, peer: str) -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer


def test_failure_log_one_line_per_host_and_kind_with_the_count(caplog):
    clock = Clock()
    log = FailureLog("feature shard 1", interval_s=10.0, clock=clock)
    bad = InvalidArgument("GatherRequest.ids: 3 bytes is not a whole number of int64 ids")
    caplog.set_level(logging.INFO)
    for port in range(100):  # a client reconnecting from new ports is still one host
        log(
            "/svc/Gather", FakeContext(f"ipv4:10.0.0.1:{40000 + port}"), bad, grpc.StatusCode.INVALID_ARGUMENT
        )
    log("/svc/Info", FakeContext("ipv4:10.0.0.2:1"), bad, grpc.StatusCode.INVALID_ARGUMENT)
    try:
        raise KeyError("boom")
    except KeyError as exc:
        for _ in range(3):
            log("/svc/Gather", FakeContext("ipv4:10.0.0.1:9"), exc, grpc.StatusCode.INTERNAL)
    clock.now += 10
    log("/svc/Gather", FakeContext("ipv4:10.0.0.1:7"), bad, grpc.StatusCode.INVALID_ARGUMENT)

    records = caplog.records
    assert len(records) == 4, [r.getMessage() for r in records]
    first, other_host, internal, later = records
    assert first.levelno == logging.WARNING and first.exc_info is None
    assert first.getMessage() == (
        "feature shard 1: /svc/Gather from ipv4:10.0.0.1:40000: INVALID_ARGUMENT: "
        "GatherRequest.ids: 3 bytes is not a whole number of int64 ids"
    )
    assert "10.0.0.2" in other_host.getMessage()
    # Unexpected errors keep their traceback (rate-limited apart from the caller's mistakes).
    assert internal.levelno == logging.ERROR and internal.exc_info is not None
    assert "unexpected error in /svc/Gather" in internal.getMessage()
    assert later.getMessage().endswith("(99 more from this host since the last line)")


def test_failure_log_lines_stay_short_and_on_one_line(caplog):
    log = FailureLog("feature shard 0", interval_s=10.0)
    caplog.set_level(logging.INFO)
    huge = InvalidArgument("x\n" * 10_000)
    log("/svc/Gather", FakeContext("ipv4:1.2.3.4:5"), huge, grpc.StatusCode.INVALID_ARGUMENT)
    [record] = caplog.records
    assert "\n" not in record.getMessage() and len(record.getMessage()) < 500


def test_one_line():
    assert one_line("a\nb\r\nc") == "a b c"
    long = one_line("y" * 100_000)
    assert len(long) == MAX_DETAILS and long.endswith("...[truncated]")
