"""A shard's replicas as the client sees them, and failover across them.

Each shard of the feature matrix may be served by several replica servers.
:func:`with_failover` runs one call on a shard: UNAVAILABLE moves on to the
next replica, a full round of failures backs off and goes round again, and the
whole thing never runs past the caller's deadline. The replica that answered
is tried first next time, so a dead replica costs one failed call, not one
per gather.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import grpc

from saintpipe.core.errors import SaintpipeTimeout, ServiceUnavailable
from saintpipe.core.grpc_status import error_from_rpc_error
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.feature_shard.wire import SERVICE_NAME, decode_chunk

log = logging.getLogger(__name__)

T = TypeVar("T")
_BACKOFF_START, _BACKOFF_MAX = 0.05, 1.0
# Client channels: accept any answer size (the server chunks to its own limit)
# and come back quickly after a replica restarts.
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


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


def connect_replica(address: str) -> Replica:
    """A channel to ``address`` and its stubs (gRPC connects lazily, on the first call)."""
    channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
    gather = channel.unary_stream(
        f"/{SERVICE_NAME}/Gather",
        request_serializer=pb.GatherRequest.SerializeToString,
        response_deserializer=decode_chunk,
    )
    gather_unary = channel.unary_unary(
        f"/{SERVICE_NAME}/GatherUnary",
        request_serializer=pb.GatherRequest.SerializeToString,
        response_deserializer=decode_chunk,
    )
    info = channel.unary_unary(
        f"/{SERVICE_NAME}/Info",
        request_serializer=pb.InfoRequest.SerializeToString,
        response_deserializer=pb.ShardInfo.FromString,
    )
    gather_shm = channel.unary_unary(
        f"/{SERVICE_NAME}/GatherUnary",
        request_serializer=pb.GatherRequest.SerializeToString,
        response_deserializer=pb.GatherChunk.FromString,
    )
    probe = channel.unary_unary(
        f"/{SERVICE_NAME}/ProbeSharedMemory",
        request_serializer=pb.SharedMemoryProbe.SerializeToString,
        response_deserializer=pb.SharedMemoryProbeReply.FromString,
    )
    return Replica(address, channel, gather, gather_unary, info, gather_shm, probe)


def with_failover(
    shard: Shard,
    call: Callable[[Replica, float], T],
    deadline_at: float,
    what: str,
    *,
    deadline: float,
    retries: int,
    count: Callable[..., None],
) -> T:
    """Run ``call(replica, timeout)`` on the shard's replicas until one answers.

    UNAVAILABLE moves on to the next replica; after a full round, back off and
    go round again, ``retries`` times, never past ``deadline_at``. Any other
    failure is raised at once as its typed saintpipe error. ``deadline`` (the
    whole budget, for messages) and ``count`` (the client's counters:
    ``failovers``, ``retries``) come from the client.

    Raises:
        ServiceUnavailable: no replica answered; names the shard and every address tried.
        SaintpipeTimeout: a replica took longer than the deadline.
    """
    failures: list[str] = []
    attempts = 0
    for round_no in range(retries + 1):
        for replica in shard.order():
            remaining = deadline_at - time.monotonic()
            if remaining <= 0:
                _unavailable(shard, what, failures, attempts, f"the {deadline:g} s deadline ran out")
            attempts += 1
            try:
                result = call(replica, remaining)
            except grpc.RpcError as exc:
                where = f"feature shard {shard.index} at {replica.address}"
                code = exc.code()
                if code == grpc.StatusCode.UNAVAILABLE:
                    failures.append(f"{replica.address}: {exc.details()}")
                    count(failovers=1)
                    log.debug("%s unavailable (%s); trying the next replica", where, exc.details())
                    continue
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise SaintpipeTimeout(
                        f"{where}: {what} did not finish within the {deadline:g} s deadline"
                    ) from None
                raise error_from_rpc_error(exc, where) from None
            if replica is not shard.replicas[shard.preferred]:
                shard.prefer(replica)
            return result
        if round_no < retries:
            remaining = deadline_at - time.monotonic()
            pause = min(_BACKOFF_START * 2**round_no, _BACKOFF_MAX) * random.uniform(0.5, 1.0)
            if remaining <= pause:
                _unavailable(shard, what, failures, attempts, f"the {deadline:g} s deadline ran out")
            count(retries=1)
            time.sleep(pause)
    _unavailable(shard, what, failures, attempts, f"{retries} retries")


def _unavailable(shard: Shard, what: str, failures: list[str], attempts: int, why: str):
    addresses = ", ".join(r.address for r in shard.replicas)
    last = "; ".join(dict.fromkeys(failures)) or "no attempt fit in the deadline"
    span = f" [{shard.info.start}, {shard.info.stop})" if shard.info is not None else ""
    raise ServiceUnavailable(
        f"feature shard {shard.index}{span}: no replica answered {what} ({addresses}) after {attempts} "
        f"attempts and {why}: {last}"
    )
