"""A shard's replicas as the client sees them, and failover across them.

Each shard of the feature matrix may be served by several replica servers.
:func:`with_failover` runs one call on a shard: UNAVAILABLE moves on to the
next replica, a full round of failures backs off and goes round again. The
replica that answered is tried first next time, so a dead replica costs one
failed call, not one per gather.

Two time limits (:class:`Budget`): ``deadline`` bounds an operation whose
shards answer (a hung replica costs it, then SaintpipeTimeout), and
``retry_deadline`` bounds how long it keeps going round while no replica of a
shard can be reached, so that a shard restarted on its address (the local
runner does that) costs the gathers of the moment a pause, not an error.
Channels reconnect on their own, with a backoff capped at 0.5 s here (gRPC's
default cap is 120 s), so a restarted server is reached again within about
half a second of listening.

UNAUTHENTICATED is never retried: the same token would be refused again, so it
is a ConfigError naming the shard's address and where the token comes from.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from saintpipe.core.errors import ConfigError, SaintpipeTimeout, ServiceUnavailable
from saintpipe.core.grpc_status import error_from_rpc_error
from saintpipe.core.report import plural
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.feature_shard.security import PLAINTEXT, TOKEN_ENV, ChannelSecurity
from saintpipe.services.feature_shard.wire import SERVICE_NAME, decode_chunk

if TYPE_CHECKING:
    from saintpipe.services.feature_shard.bulk_client import BulkChannel

log = logging.getLogger(__name__)

T = TypeVar("T")
# Rounds back off from 50 ms to at most 250 ms: while a server is down each round is a few calls that fail
# within a millisecond (the channel is in TRANSIENT_FAILURE), so a short cap costs nothing and the first round
# after the channel reconnects comes at most 250 ms later.
_BACKOFF_START, _BACKOFF_MAX = 0.05, 0.25
_LAST_TRY = 0.05  # seconds kept for a last round when the retry deadline is near
# Client channels: accept any answer size (the server chunks to its own limit)
# and come back quickly after a replica restarts: while a server is down, calls
# fail at once (UNAVAILABLE) until the channel's next reconnection attempt
# succeeds, and those attempts back off up to this cap (gRPC's default: 120 s).
# Two refused connections a second per channel cost nothing; across hosts each attempt waits for its
# connect timeout anyway.
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


@dataclass(frozen=True)
class Budget:
    """The time limits of one client operation (a gather, the start-up calls), fixed when it starts.

    ``deadline``: seconds the operation may take while its shards answer.
    ``retry_deadline``: seconds it may keep retrying a shard no replica of which can be reached (never
    less than ``deadline``).
    """

    deadline: float
    retry_deadline: float
    deadline_at: float
    retry_until: float

    @classmethod
    def start(cls, deadline: float, retry_deadline: float) -> "Budget":
        now = time.monotonic()
        return cls(deadline, retry_deadline, now + deadline, now + max(deadline, retry_deadline))

    def timeout(self, retrying: bool) -> float:
        """Seconds the next call may take (<= 0: none may start).

        Within the deadline a call gets what is left of it; once a shard was
        unreachable (``retrying``), each call gets at most one deadline, up to ``retry_until``.
        """
        now = time.monotonic()
        if not retrying:
            return self.deadline_at - now
        return min(self.deadline, self.retry_until - now)


@dataclass(eq=False)
class Replica:
    """One server of a shard: its channel and the stubs the client calls on it."""

    address: str
    channel: grpc.Channel
    gather: Callable  # streaming: answers larger than one message
    gather_unary: Callable  # one message: every answer that fits
    info: Callable
    gather_shm: Callable  # GatherUnary with a shared-memory target: a metadata-only GatherChunk
    probe: Callable  # ProbeSharedMemory
    has_unary: bool = True  # False once the server answered UNIMPLEMENTED (a version without GatherUnary)
    shm: bool | None = None  # sees this host's shared memory (None: not probed yet)
    has_token: bool = False  # our calls carry a token (for the message when the server refuses them)
    bulk_port: int | None = None  # the replica's bulk data plane port from its Info (0: none; None: not asked)
    bulk: BulkChannel | None = None  # its BulkChannel once used (bulk_client.py)


@dataclass(eq=False)
class Shard:
    """A shard's replicas, the one to try first, and the shard's Info once asked."""

    index: int
    replicas: list[Replica]
    preferred: int = 0  # replica tried first: the last one that answered
    info: pb.ShardInfo | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def order(self) -> list[Replica]:
        with self.lock:
            p = self.preferred
        return self.replicas[p:] + self.replicas[:p]

    def prefer(self, replica: Replica) -> None:
        with self.lock:
            self.preferred = self.replicas.index(replica)


def connect_replica(address: str, security: ChannelSecurity = PLAINTEXT) -> Replica:
    """A channel to ``address`` (TLS and a token per ``security``) and its stubs (gRPC connects lazily, on the
    first call)."""
    channel = security.channel(address, _CHANNEL_OPTIONS)

    def stub(kind: str, method: str, request: Any, answer: Callable) -> Any:  # grpc has no annotations
        return getattr(channel, kind)(f"/{SERVICE_NAME}/{method}", request_serializer=request.SerializeToString,
                                      response_deserializer=answer)

    stubs = [  # Replica's gather, gather_unary, info, gather_shm and probe
        stub("unary_stream", "Gather", pb.GatherRequest, decode_chunk),
        stub("unary_unary", "GatherUnary", pb.GatherRequest, decode_chunk),
        stub("unary_unary", "Info", pb.InfoRequest, pb.ShardInfo.FromString),
        stub("unary_unary", "GatherUnary", pb.GatherRequest, pb.GatherChunk.FromString),
        stub("unary_unary", "ProbeSharedMemory", pb.SharedMemoryProbe, pb.SharedMemoryProbeReply.FromString),
    ]
    if security.metadata:  # a plaintext channel: gRPC sends no call credentials there, so every call adds it
        stubs = [functools.partial(call, metadata=security.metadata) for call in stubs]
    return Replica(address, channel, *stubs, has_token=security.has_token)  # type: ignore[misc]  # 5 stubs


def refused_token(replica: Replica) -> ConfigError:
    """The error for an UNAUTHENTICATED answer: a configuration to fix, not a server to wait for."""
    if replica.has_token:
        return ConfigError(
            f"feature shard {replica.address} refused our token (UNAUTHENTICATED): check --token-file / "
            f"{TOKEN_ENV} (shards and clients need the same token)"
        )
    return ConfigError(
        f"feature shard {replica.address} requires a token (UNAUTHENTICATED) and this client sends none: set "
        f"{TOKEN_ENV} or a token file (trainer: --feature-token-file)"
    )


# Words of a failed TLS handshake in gRPC's status details: a certificate, CA or name that does not match is
# a configuration to fix; waiting would not help (a restarting server refuses connections instead).
# (A server that refuses our certificate, or a plaintext client, just closes the socket: that one cannot be
# told from a restart, and is retried until the retry deadline.)
_TLS_FAILURES = ("CERTIFICATE_VERIFY_FAILED", "WRONG_VERSION_NUMBER", "Hostname Verification Check failed",
                 "certificate verify failed", "not in peer certificate")


def tls_mismatch(replica: Replica, details: str) -> ConfigError | None:
    """A ConfigError when ``details`` (of an UNAVAILABLE answer) tell of a TLS handshake that cannot succeed."""
    if not any(word in details for word in _TLS_FAILURES):
        return None
    return ConfigError(
        f"feature shard {replica.address}: the TLS handshake failed ({details}): check the CA, the certificates "
        "and the server name on both sides (--tls-cert/--tls-client-ca of the shard, --feature-tls-* of the "
        "client)"
    )


def with_failover(
    shard: Shard,
    call: Callable[[Replica, float], T],
    budget: Budget,
    what: str,
    *,
    retries: int | None,
    count: Callable[..., None],
    closed: Callable[[], bool] = lambda: False,
) -> T:
    """Run ``call(replica, timeout)`` on the shard's replicas until one answers.

    UNAVAILABLE (refused, reset: a dead or restarting server) moves on to the
    next replica; after a full round, back off (50 ms doubling to 250 ms,
    jittered) and go round again until ``budget.retry_until`` (and at most
    ``retries`` times, unless None), or until ``closed()``. Any other failure
    is raised at once as its typed saintpipe error. ``count`` takes the
    client's counters (``failovers``, ``retries``).

    Raises:
        ServiceUnavailable: no replica answered in time; names the shard and every address tried.
        SaintpipeTimeout: a replica took longer than the deadline.
    """
    failures: list[str] = []
    attempts = 0
    round_no = 0
    began = time.monotonic()
    while True:
        for replica in shard.order():
            timeout = budget.timeout(retrying=bool(failures))
            if timeout <= 0:
                _unavailable(shard, what, failures, attempts, _ran_out(budget, failures))
            attempts += 1
            try:
                result = call(replica, timeout)
            except grpc.RpcError as exc:
                where = f"feature shard {shard.index} at {replica.address}"
                code = exc.code()
                if code == grpc.StatusCode.UNAUTHENTICATED:
                    raise refused_token(replica) from None
                if code == grpc.StatusCode.UNAVAILABLE and (tls := tls_mismatch(replica, exc.details() or "")):
                    raise tls from None
                if code == grpc.StatusCode.UNAVAILABLE:
                    failures.append(f"{replica.address}: {exc.details()}")
                    count(failovers=1)
                    log.debug("%s unavailable (%s); trying the next replica", where, exc.details())
                    continue
                if code == grpc.StatusCode.DEADLINE_EXCEEDED and failures and timeout < budget.deadline:
                    # The call only had what was left of the retry window (microseconds, at times): the shard
                    # stayed unreachable until the window closed, which is not a replica too slow to answer.
                    _unavailable(shard, what, failures, attempts, _ran_out(budget, failures))
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise SaintpipeTimeout(
                        f"{where}: {what} did not finish within {timeout:.3g} s "
                        f"(deadline {budget.deadline:g} s)"
                    ) from None
                raise error_from_rpc_error(exc, where) from None
            if replica is not shard.replicas[shard.preferred]:
                shard.prefer(replica)
            if round_no:
                log.info("feature shard %d answered %s again at %s after %.2f s", shard.index, what,
                         replica.address, time.monotonic() - began)
            return result
        if round_no == 0:
            log.warning("feature shard %d: no replica answered %s (%s); retrying for up to %.1f s",
                        shard.index, what, failures[-1], budget.retry_until - began)
        round_no += 1
        if retries is not None and round_no > retries:
            _unavailable(shard, what, failures, attempts, plural(retries, "retry", "retries"))
        if closed():
            _unavailable(shard, what, failures, attempts, "the client was closed")
        pause = min(_BACKOFF_START * 2 ** (round_no - 1), _BACKOFF_MAX) * random.uniform(0.5, 1.0)
        remaining = budget.retry_until - time.monotonic()
        if remaining <= 0:
            _unavailable(shard, what, failures, attempts, _ran_out(budget, failures))
        count(retries=1)
        # A pause that would use up the time leaves room for a last round (a refused call takes milliseconds).
        time.sleep(max(0.0, min(pause, remaining - _LAST_TRY)))


def _ran_out(budget: Budget, failures: list[str]) -> str:
    if failures and budget.retry_deadline > budget.deadline:
        return f"the {budget.retry_deadline:g} s retry deadline ran out"
    return f"the {budget.deadline:g} s deadline ran out"


def _unavailable(shard: Shard, what: str, failures: list[str], attempts: int, why: str):
    addresses = ", ".join(r.address for r in shard.replicas)
    last = "; ".join(list(dict.fromkeys(failures))[-4:]) or "no attempt fit in the deadline"  # the last few
    span = f" [{shard.info.start}, {shard.info.stop})" if shard.info is not None else ""
    raise ServiceUnavailable(
        f"feature shard {shard.index}{span}: no replica answered {what} ({addresses}) after {attempts} "
        f"attempts and {why}: {last}"
    )
