"""The consumer side of a pool object: getting entries (reclaiming those of dead consumers), acknowledging."""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable

import redis
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.codec.compact import decode_entry
from saintpipe.services.pool.deadletter import DeadLetters
from saintpipe.services.pool.keys import log
from saintpipe.services.pool.link import RedisLink
from saintpipe.services.pool.records import PoolEntry
from saintpipe.services.pool.resp import pack
from saintpipe.services.pool.scripts import SCRIPTS

from saintpipe.core.errors import ConfigError, DecodeError, InvalidArgument, SaintpipeError
from saintpipe.core.report import plural
from saintpipe.core.subgraph import Subgraph, SubgraphNodes

# Longest single blocking read; between reads the consumer looks for entries to reclaim.
_MAX_BLOCK_SLICE = 1.0
# Longest an ack(wait=False) waits for a round trip to carry it before a background flush sends it.
_MAX_ACK_DELAY = 0.1


class Consumer:
    """Gets and acknowledgements of one pool object; ``SubgraphPool`` documents each public method.

    Args:
        visibility_timeout: seconds an entry stays with its consumer before another may take it.
        socket_timeout: seconds one Redis call may take (a blocking read ends before it).
        link: the pool object's round trips (its job, keys and the acknowledgements ``ack(wait=False)`` queues).
        dead: where entries that cannot be trained on go.
        max_deliveries: an entry delivered more often than this without an acknowledgement is
            dead-lettered instead of delivered again; 0: no limit.
    """

    def __init__(
        self, visibility_timeout: float, socket_timeout: float, link: RedisLink, dead: DeadLetters, max_deliveries: int
    ) -> None:
        self.job_id = link.job_id
        self._keys = link.keys
        self._group = link.keys.group
        self._entry_keys = link.keys.entry
        self._link = link
        self._acks = link.acks
        self._dead = dead
        self._max_deliveries = max_deliveries
        # Consumer name -> ids recover() took back for it, delivered first by its next gets.
        self._recovered: dict[str, deque[str]] = {}
        self._get = SCRIPTS["GET"]
        self._min_idle_ms = max(1, int(visibility_timeout * 1000))
        # A blocking read must end before the socket times out.
        self._block_slice = min(_MAX_BLOCK_SLICE, visibility_timeout / 2, socket_timeout / 2)
        self._ack_delay = min(_MAX_ACK_DELAY, visibility_timeout / 4)
        self._closed = threading.Event()  # ends the flush thread
        # Abandoned entries are looked for first at most this often (and whenever nothing new is there).
        self._claim_interval = min(_MAX_BLOCK_SLICE, visibility_timeout / 4)
        self._next_claim = 0.0

    def get(
        self, consumer: str, timeout: float | None, expand: Callable[[SubgraphNodes], Subgraph] | None = None
    ) -> PoolEntry | None:
        if not consumer:
            raise InvalidArgument("consumer name must be non-empty")
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        arrived = None  # an entry a blocking read has just delivered to consumer: the script fetches it by id
        while True:
            recovered, queued = (arrived, False) if arrived is not None else (self._take_recovered(consumer), True)
            arrived = None
            if recovered is not None:
                order = recovered  # that entry first, if the consumer still holds it
            else:
                now = time.monotonic()
                abandoned_first = now >= self._next_claim
                if abandoned_first:
                    self._next_claim = now + self._claim_interval
                order = "1" if abandoned_first else "0"
            acks = self._acks.take()
            args = [self._group, consumer, self._min_idle_ms, order, self._max_deliveries, *acks]

            def commands(args: list = args) -> list[list]:
                # One round trip: the GET script (first acknowledging what ack(wait=False) queued) moves
                # the entry's bytes to a key named here, then GET them. A fresh key for every attempt:
                # an attempt whose reply was lost may have run, and its entry's bytes are under its key.
                dest = self._keys.new_bytes_key()
                return [self._get.command([*self._entry_keys, dest], args), pack("GET", dest)]

            try:
                (eid, deliveries, present, acked, *unusable), payload = self._link.run(commands, "get a subgraph")
            except BaseException:
                self._acks.requeue(acks)
                if recovered is not None and queued:
                    self._recovered[consumer].appendleft(recovered)
                raise
            if acked != len(acks):
                self._acks.note_stale(len(acks) - acked, len(acks))
            if eid:  # nil (or false, depending on the protocol) when there is none
                fault = self._unusable(*unusable) if unusable else None
                entry = self._entry(consumer, eid.decode(), int(deliveries), payload if present else None, fault,
                                    expand)
                if entry is not None:
                    return entry
            elif recovered is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                block = self._block_slice if remaining is None else min(self._block_slice, remaining)
                arrived = self._blocking_read(consumer, block)
            # else it was no longer this consumer's, and nothing new either: ask again in the usual order

    def recover(self, consumer: str) -> int:
        if not consumer:
            raise InvalidArgument("consumer name must be non-empty")
        ids = self._link.eval(
            "RECOVER",
            self._entry_keys,
            [self._group, consumer, self._max_deliveries],
            "recover a restarted consumer's entries",
        )
        # All it holds now: replaces what an earlier recover() queued and get() has not delivered yet.
        self._recovered[consumer] = deque(i.decode() for i in ids)
        if ids:
            log.info(
                "pool job %s: consumer %s took back %d unacknowledged entries", self.job_id, consumer, len(ids)
            )
        return len(ids)

    def _take_recovered(self, consumer: str) -> str | None:
        queue = self._recovered.get(consumer) if self._recovered else None
        if not queue:
            return None
        try:
            return queue.popleft()
        except IndexError:  # another thread took the last one
            return None

    def _blocking_read(self, consumer: str, seconds: float) -> str | None:
        """Wait up to ``seconds`` for a new entry; its id (now held by ``consumer``), or None.

        Its bytes are left to the GET script, asked for that id as for a recovered entry: the key an
        entry names is only read after the script has checked it (job_keys.lua).
        """
        block = pack(
            "XREADGROUP",
            "GROUP",
            self._group,
            consumer,
            "COUNT",
            1,
            "BLOCK",
            max(1, int(seconds * 1000)),
            "STREAMS",
            self._keys.stream,
            ">",
        )
        try:
            reply = self._link.run([block], "wait for a subgraph")[0]
        except redis.ResponseError as exc:
            if str(exc).startswith("WRONGTYPE"):  # replaced since the GET script checked it
                raise self._link.wrong_type(self._keys.stream, "stream") from None
            if "NOGROUP" not in str(exc):
                raise
            return None  # "NOGROUP the consumer group this client was blocked on no longer exists": see below
        except InvalidArgument:  # NOGROUP naming the group (connection.translate_error)
            # The stream vanished (restart or delete_job): the next GET script recreates it. Or the group was
            # removed meanwhile: the next GET script says so.
            return None
        if not reply:
            return None
        # RESP3 answers {stream: entries}, RESP2 [[stream, entries]].
        entries = next(iter(reply.values())) if isinstance(reply, dict) else reply[0][1]
        return entries[0][0].decode()

    def _unusable(self, key: bytes, state: bytes) -> str:
        """Why the GET script would not touch the key an entry names (``key``, ``state``: get.lua)."""
        if not key:
            return "its bytes are missing: its entry has no field k naming them"
        # repr: the key is whatever was written into the entry; it goes into logs and records as one line.
        name = repr(key.decode("utf-8", "replace")[:200])
        if state == b"foreign":
            return f"its bytes key {name} is not one of job {self.job_id}'s subgraph keys"
        return f"its bytes key {name} holds a {state.decode()}, not subgraph bytes"

    def _entry(
        self,
        consumer: str,
        eid: str,
        deliveries: int,
        payload: memoryview | bytes | None,
        fault: str | None = None,
        expand: Callable[[SubgraphNodes], Subgraph] | None = None,
    ) -> PoolEntry | None:
        """Decode the bytes of a delivered entry; None if it went to the dead-letter stream instead.

        A node set (format_version 2) is handed to ``expand``, whose DecodeError dead-letters it too.

        ``fault``: why its bytes could not be fetched (the key it names is not the job's own subgraph
        bytes). None too if it could not be decoded and another consumer took it over meanwhile (that
        one deals with it).
        """
        if self._max_deliveries and deliveries > self._max_deliveries:
            # Each delivery ended without an acknowledgement: it probably crashes whoever takes it.
            self._dead.move(
                consumer, eid, f"delivered {plural(deliveries - 1, 'time')} without acknowledgement", deliveries - 1
            )
            return None
        if fault is not None:
            self._dead.move(consumer, eid, fault, deliveries)
            return None
        try:
            data: memoryview | bytes | bytearray | None = payload
            if payload is not None and shared_memory.is_reference(payload):
                data = shared_memory.read(payload)  # ConfigError: not readable here
                if data is None:
                    raise DecodeError(
                        f"its shared-memory slot {shared_memory.SlotReference.parse(payload).name} is gone"
                    )
            if data is None:
                raise DecodeError("its bytes are missing from Redis")
            subgraph = decode_entry(data)
            if isinstance(subgraph, SubgraphNodes):
                if expand is None:
                    raise ConfigError(
                        f"pool job {self.job_id}: entry {eid} is a node set (pool wire 'nodes'); this consumer "
                        "cannot induce it (get(..., expand=...): the trainer's SubgraphExpander over its dataset). "
                        "It is left for another consumer"
                    )
                subgraph = expand(subgraph)
            return PoolEntry(entry_id=eid, subgraph=subgraph, deliveries=deliveries)
        except DecodeError as exc:
            # Out of the way, not raised: one bad entry must not end training. Only while this consumer
            # still holds it: another may have taken it over in between.
            self._dead.move(consumer, eid, str(exc), deliveries)
            return None

    def ack(self, entry_id: str, *, wait: bool) -> bool | None:
        if not wait:
            self._queue_ack(entry_id)
            return None
        done = self._link.eval(
            "ACK", self._entry_keys, [self._group, "acknowledged", "", entry_id], "acknowledge a subgraph"
        )
        if not done:
            log.debug("pool job %s: entry %s was not pending when acknowledged", self.job_id, entry_id)
        return bool(done)

    def flush_acks(self) -> None:
        if self._acks.queued():
            self._link.run([], "acknowledge subgraphs")

    def _queue_ack(self, entry_id: str) -> None:
        if self._acks.push(entry_id):
            threading.Thread(
                target=_flush_loop,
                args=(weakref.ref(self), self._closed, self._ack_delay),
                name=f"pool-acks-{self.job_id}",
                daemon=True,
            ).start()

    def _flush_due(self) -> None:
        """Send queued acknowledgements that no round trip has carried within ``_ack_delay``."""
        if self._acks.due(self._ack_delay):
            try:
                self._link.run([], "acknowledge subgraphs")
            except (redis.RedisError, SaintpipeError) as exc:  # still queued: the next call sends them
                log.warning("pool job %s: could not send queued acknowledgements: %s", self.job_id, exc)

    def touch(self, consumer: str, entry_id: str) -> bool:
        return bool(
            self._link.eval("TOUCH", self._keys.stream_and_counters, [self._group, consumer, entry_id], "extend a lease")
        )

    def stop(self) -> None:
        """End the background flush (``close`` then sends what is queued itself)."""
        self._closed.set()


def _flush_loop(consumer_ref: weakref.ref, closed: threading.Event, period: float) -> None:
    """A pool's background flush of queued acknowledgements; holds its consumer only weakly, ends with it."""
    while not closed.wait(period):
        consumer = consumer_ref()
        if consumer is None:
            return
        consumer._flush_due()
        del consumer
