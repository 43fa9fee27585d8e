"""``SubgraphPool``: a bounded, Redis-stream-backed pool of sampled subgraphs for one training job.

Producers (samplers) ``put`` subgraphs; consumers (trainers) ``get`` one,
train on it, then ``ack`` it. Each job is one Redis stream with one consumer
group for its trainers, so every entry goes to exactly one trainer. An entry a
trainer got but never acknowledged (the trainer died) goes to another trainer
once it has been idle for ``visibility_timeout`` seconds; ``stats()`` counts
these redeliveries. The pool is bounded: with ``capacity`` unacknowledged
entries held, ``put`` waits; nothing unconsumed is ever trimmed or dropped.

Every call survives a Redis restart: it retries with exponential backoff and
raises :class:`~saintpipe.core.errors.ServiceUnavailable` only when Redis stays
unreachable for ``reconnect_timeout`` seconds. See docs/pool.md for what a
restart of a non-persistent Redis loses.

Each put and each get is one round trip (see docs/pool.md); ``ack(entry_id,
wait=False)`` adds none: the acknowledgement travels with the pool object's
next call.

``transport`` says where a producer leaves the bytes: in Redis (``"redis"``,
which works from anywhere), or in a same-host shared-memory slot that the
pool entry references (``"shared_memory"``, :mod:`saintpipe.services.pool.shared_memory`),
or the latter whenever the Redis URL is a loopback one (``"auto"``). Consumers
read both kinds of entry whatever their own setting.

Example::

    with SubgraphPool(url, job_id="cora-gcn", capacity=64) as pool:
        pool.put(subgraph)
        entry = pool.get("trainer-0", timeout=5.0)
        train_step(entry.subgraph)
        pool.ack(entry.entry_id, wait=False)  # or pool.ack(entry.entry_id) -> bool
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

import numpy as np
import redis

from saintpipe.core.errors import DecodeError, InvalidArgument, SaintpipeError, SaintpipeTimeout
from saintpipe.services.pool import scripts, shared_memory
from saintpipe.services.pool.codec import decode_owned, encode_subgraph_into, encode_subgraph_parts
from saintpipe.services.pool.config import JOB_ID_PATTERN, TRANSPORTS, PoolConfig
from saintpipe.services.pool.connection import (
    ReconnectPolicy,
    call_with_reconnect,
    make_client,
    redact_url,
    translate_error,
)
from saintpipe.services.pool.resp import Connections, PendingExchange, pack, raise_first_error
from saintpipe.core.subgraph import Subgraph

log = logging.getLogger(__name__)

GROUP = "trainers"
KEY_PREFIX = "saintpipe:pool:"
# Longest single blocking read; between reads the consumer looks for entries to reclaim.
_MAX_BLOCK_SLICE = 1.0
# A producer facing a full pool polls from this interval, doubling up to the maximum.
_POLL_MIN, _POLL_MAX = 0.002, 0.05
# An upload waiting for room expires this long after its producer stops renewing it (it died).
_UPLOAD_TTL_MS = 120_000
# Bumped in a forked child (see _new_bytes_key).
_FORKS = [0]
os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))
# Longest an ack(wait=False) waits for a round trip to carry it before a background flush sends it.
_MAX_ACK_DELAY = 0.1
# Shared-memory producers: oldest entries asked about along with each put (is its slot free again?),
# and, when no slot is free and _SLOTS_WITHOUT_RECLAIM exist, before creating another.
_SLOT_CHECKS_PER_PUT, _SLOT_CHECKS_WHEN_SHORT = 2, 32
# Up to this many slots a producer short of a free one makes another rather than asking Redis at once:
# a pipelined producer holds one being written, one in flight and the entries whose checks are on the way.
_SLOTS_WITHOUT_RECLAIM = 8


def resolve_transport(transport: str, url: str) -> str:
    """``"redis"`` or ``"shared_memory"``: what ``transport`` means for a pool on ``url`` in this process.

    Raises:
        InvalidArgument: an unknown transport.
    """
    if transport not in TRANSPORTS:
        raise InvalidArgument(f"transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
    if transport == "auto":
        return "shared_memory" if shared_memory.is_local(url) and shared_memory.available() else "redis"
    return transport


@dataclass(frozen=True)
class PoolEntry:
    """One subgraph handed to a consumer.

    Attributes:
        entry_id: the stream entry id; pass it to ``ack`` after training on it.
        subgraph: the decoded subgraph (read-only arrays).
        deliveries: how many times this entry has been delivered (1 = first time).
    """

    entry_id: str
    subgraph: Subgraph
    deliveries: int


@dataclass(frozen=True)
class PoolStats:
    """A consistent snapshot of one job's pool.

    Attributes:
        depth: entries waiting for a trainer (never delivered, or not yet reclaimed).
        pending: entries delivered to a trainer and not yet acknowledged.
        produced: entries ever put.
        acknowledged: entries acknowledged (trained on).
        redelivered: deliveries of entries taken back from a trainer that held them too long.
        malformed: entries removed because they did not decode.
        capacity: this pool object's capacity (depth + pending never exceeds it).
    """

    depth: int
    pending: int
    produced: int
    acknowledged: int
    redelivered: int
    malformed: int
    capacity: int

    @property
    def held(self) -> int:
        """Unacknowledged entries stored: depth + pending."""
        return self.depth + self.pending


_UNANSWERED = object()


@dataclass(eq=False)
class _Put:
    """One put in progress: its upload key, its commands, and what Redis has answered so far."""

    upload: str
    keys: list
    commands: list
    acks: list[str]
    parts: list
    checked: list[str]
    writer: shared_memory.SlotWriter | None = None
    slot: int | None = None
    exchange: PendingExchange | None = None
    result: object = _UNANSWERED  # an entry id (bytes), the number held (full), -1 (upload gone), None (ask)


PreparedPut = _Put  # what SubgraphPool.prepare returns, for put_nowait


class _Script:
    """A Lua script called by its SHA, loaded again when a restarted Redis has forgotten it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    def command(self, keys: list, args: list) -> list:
        return pack("EVALSHA", self.sha, len(keys), *keys, *args)


def _flush_loop(pool_ref: weakref.ref, closed: threading.Event, period: float) -> None:
    """A pool's background flush of queued acknowledgements; holds the pool only weakly, ends with it."""
    while not closed.wait(period):
        pool = pool_ref()
        if pool is None:
            return
        pool._flush_due()
        del pool


class SubgraphPool:
    """The pool of one training job on one Redis server.

    Args:
        url: Redis URL, ``redis://:PASSWORD@HOST:PORT/DB``.
        job_id: the training job (letters, digits and ``_ . : -``).
        capacity: most unacknowledged entries held; ``put`` waits beyond it.
        visibility_timeout: seconds an unacknowledged entry stays with its consumer
            before another consumer may take it.
        reconnect: backoff and deadline while Redis is unreachable.
        socket_timeout: seconds one Redis call may take.
        transport: where this object's puts leave the bytes: ``"redis"``,
            ``"shared_memory"`` (same-host slots), or ``"auto"`` (shared memory
            when the URL is a loopback one).

    Raises:
        InvalidArgument: a bad job id, capacity, timeout or transport.
        ConfigError: ``"shared_memory"`` where ``/dev/shm`` is not usable.
        ServiceUnavailable: Redis unreachable for ``reconnect.give_up_after`` seconds.
        AuthenticationFailed: Redis refused the URL's password.
    """

    def __init__(
        self,
        url: str,
        job_id: str,
        *,
        capacity: int = 256,
        visibility_timeout: float = 30.0,
        reconnect: ReconnectPolicy | None = None,
        socket_timeout: float = 10.0,
        transport: str = "redis",
    ) -> None:
        if not isinstance(job_id, str) or not re.match(JOB_ID_PATTERN, job_id):
            raise InvalidArgument(
                f"job_id {job_id!r}: use 1-128 letters, digits and _ . : - (starting with a letter or digit)"
            )
        if not isinstance(capacity, int) or capacity < 1:
            raise InvalidArgument(f"capacity {capacity!r}: must be an integer >= 1")
        if not visibility_timeout > 0:
            raise InvalidArgument(f"visibility_timeout {visibility_timeout!r}: must be > 0 seconds")
        self.url = url
        self.job_id = job_id
        self.capacity = capacity
        self.visibility_timeout = float(visibility_timeout)
        self.reconnect = reconnect or ReconnectPolicy()
        self.transport = resolve_transport(transport, url)
        if self.transport == "shared_memory":
            shared_memory.require_available()
        self._slot_writer: shared_memory.SlotWriter | None = None
        self._slot_fork = -1
        self._slot_failure_logged = False
        self._pending: _Put | None = None  # a put_nowait() to settle()
        self.stream_key = f"{KEY_PREFIX}{{{job_id}}}:stream"
        self.counters_key = f"{KEY_PREFIX}{{{job_id}}}:counters"
        self.at_key = f"{KEY_PREFIX}{{{job_id}}}:at"
        self._keys = [self.stream_key, self.counters_key]
        self._entry_keys = [self.stream_key, self.counters_key, self.at_key]
        self._upload_prefix = f"{KEY_PREFIX}{{{job_id}}}:sg:"
        self._key_token, self._key_counter, self._fork_generation = (
            secrets.token_hex(8),
            itertools.count(),
            _FORKS[0],
        )
        self._put_args = [GROUP, self.capacity, _UPLOAD_TTL_MS]
        self._min_idle_ms = max(1, int(self.visibility_timeout * 1000))
        # A blocking read must end before the socket times out.
        self._block_slice = min(_MAX_BLOCK_SLICE, self.visibility_timeout / 2, socket_timeout / 2)
        self._client = make_client(url, socket_timeout=socket_timeout)
        self._conns = Connections(self._client)
        # Acknowledgements made with ack(wait=False), sent with the next round trip (or by the flusher).
        self._acks: list[str] = []
        self._acks_since = 0.0
        self._ack_delay = min(_MAX_ACK_DELAY, self.visibility_timeout / 4)
        self._lock = threading.Lock()
        self._flusher: int | None = None  # the fork generation whose flush thread runs
        self._closed = threading.Event()
        # Abandoned entries are looked for first at most this often (and whenever nothing new is there).
        self._claim_interval = min(_MAX_BLOCK_SLICE, self.visibility_timeout / 4)
        self._next_claim = 0.0
        self._scripts = {
            name: _Script(getattr(scripts, name)) for name in ("PUT", "PUT_REFERENCE", "GET", "ACK", "TOUCH", "STATS")
        }
        self._call(self._client.ping, "connect")

    @classmethod
    def from_config(cls, config: PoolConfig, url: str | None = None) -> SubgraphPool:
        """Build a pool from a :class:`PoolConfig` (``url`` overrides ``config.url``)."""
        url = url or config.url
        if url is None:
            raise InvalidArgument("pool config has no url: start a RedisServer and pass its url")
        return cls(
            url,
            config.job_id,
            capacity=config.capacity,
            visibility_timeout=config.visibility_timeout,
            reconnect=ReconnectPolicy(
                config.reconnect_initial_backoff, config.reconnect_max_backoff, config.reconnect_timeout
            ),
            socket_timeout=config.socket_timeout,
            transport=config.transport,
        )

    # -- producing ---------------------------------------------------------------------------------------

    def put(self, sg: Subgraph, timeout: float | None = None) -> str:
        """Encode ``sg`` and append it, waiting while the pool is full.

        Args:
            sg: the subgraph (leave its arrays unchanged until ``put`` returns: they are sent in place).
            timeout: seconds to wait for room; ``None`` waits forever, ``0`` does not wait.

        Returns:
            The new entry id.

        Raises:
            SaintpipeTimeout: the pool stayed full for ``timeout`` seconds.
            InvalidArgument: the subgraph is malformed, or a ``put_nowait`` is still unsettled.
        """
        self._require_settled()
        return self._put_now(self._prepare(sg), timeout)

    def put_encoded(self, data: bytes, timeout: float | None = None) -> str:
        """Like ``put`` for a subgraph already encoded with ``encode_subgraph``."""
        self._require_settled()
        put = None
        if self.transport == "shared_memory":
            put = self._in_slot(lambda allocate: _copy_into(data, allocate))
        return self._put_now(put or self._new_put([data]), timeout)

    def _put_now(self, put: _Put, timeout: float | None) -> str:
        """One round trip for ``put``, then wait for room as long as ``timeout`` allows."""
        try:
            self._answer(put)
        except BaseException:
            self._conclude(put, None)
            raise
        return self._room(put, timeout, keep=False)

    def put_nowait(self, sg: Subgraph | PreparedPut) -> None:
        """Start a put and return without waiting for Redis's answer.

        Redis handles the put while the caller draws the next subgraph, instead
        of the caller idling for the round trip. :meth:`settle` then reads the
        answer (it has long arrived) and waits while the pool is full; every
        ``put_nowait`` must be settled before the next put of this object.

        Args:
            sg: a subgraph, or a put made ready by :meth:`prepare`. With the
                ``redis`` transport the arrays are sent in place: leave them
                unchanged until :meth:`settle` returns.

        Raises:
            InvalidArgument: the subgraph is malformed, or the previous ``put_nowait`` is unsettled.
        """
        self._require_settled()
        put = sg if isinstance(sg, _Put) else self._prepare(sg)
        try:
            put.exchange = self._conns.start(put.commands)
        except (redis.ConnectionError, redis.TimeoutError):
            put.exchange = None  # settle() sends it again, through the reconnect path
        self._pending = put

    def prepare(
        self,
        write_into: Callable[[Callable[[int], np.ndarray]], int],
        or_else: Callable[[], Subgraph],
    ) -> PreparedPut:
        """Make a put ready to send, its message written by the caller: no Redis traffic yet.

        With the shared-memory transport ``write_into(allocate)`` writes an
        encoded message (``codec.frame_subgraph``/``seal_subgraph``, or
        ``encode_subgraph_into``) straight into a slot and returns its length;
        otherwise, or when no slot can be written, the subgraph ``or_else()``
        returns is encoded as usual. This may run while a ``put_nowait`` is
        unsettled: a producer draws subgraph k+1 into its slot while Redis
        handles subgraph k. Send it with :meth:`put_nowait`, or give it up with
        :meth:`cancel`.
        """
        if self.transport == "shared_memory":
            put = self._in_slot(write_into)
            if put is not None:
                return put
        return self._new_put(encode_subgraph_parts(or_else()))

    def cancel(self, put: PreparedPut) -> None:
        """Give up a prepared put that was never sent (its slot is free again)."""
        if put is self._pending:
            raise InvalidArgument(f"pool job {self.job_id}: that put was sent; settle() or abandon() it")
        self._requeue_acks(put.acks)  # they were to travel with it
        put.acks = []
        if put.writer is not None and put.slot is not None:
            put.writer.release(put.slot)
            put.slot = None

    def settle(self, timeout: float | None = None) -> str | None:
        """Finish the put started by :meth:`put_nowait`, waiting while the pool is full.

        Args:
            timeout: seconds to wait for room; ``None`` waits forever, ``0`` does not wait.

        Returns:
            The new entry id; None when no put was pending.

        Raises:
            SaintpipeTimeout: the pool stayed full for ``timeout`` seconds. The put
                stays pending: call ``settle`` again, or :meth:`abandon` it.
            ServiceUnavailable: Redis stayed away; the put is abandoned.
        """
        put = self._pending
        if put is None:
            return None
        try:
            if put.result is _UNANSWERED:
                self._answer(put)
            entry_id = self._room(put, timeout, keep=True)
        except SaintpipeTimeout:
            raise
        except BaseException:
            self._pending = None
            self._conclude(put, None)
            raise
        self._pending = None
        return entry_id

    def abandon(self) -> str | None:
        """Give up the pending ``put_nowait``, unless Redis already took it.

        Returns:
            The entry id when Redis had added it after all (it stays), else None.
        """
        try:
            return self.settle(timeout=0)
        except SaintpipeTimeout:
            put, self._pending = self._pending, None
            if put is not None:
                self._conclude(put, None)
            return None

    @property
    def unsettled(self) -> bool:
        """Whether a ``put_nowait`` awaits :meth:`settle`."""
        return self._pending is not None

    def _require_settled(self) -> None:
        if self._pending is not None:
            raise InvalidArgument(f"pool job {self.job_id}: settle() the previous put_nowait() first")

    def _prepare(self, sg: Subgraph) -> _Put:
        """Encode ``sg`` (into a shared-memory slot when that is the transport) and frame its put."""
        if self.transport == "shared_memory":
            put = self._in_slot(lambda allocate: encode_subgraph_into(sg, allocate))
            if put is not None:
                return put
        return self._new_put(encode_subgraph_parts(sg))

    def _in_slot(self, encode_into) -> _Put | None:
        """Write the message into a shared-memory slot and frame a put of a reference to it.

        Returns None when no slot could be written (``/dev/shm`` full): the caller puts the bytes in Redis.
        """
        writer = self._slots()

        def when_short() -> None:
            if writer.slots >= _SLOTS_WITHOUT_RECLAIM:
                self._reclaim_slots(writer, writer.oldest(_SLOT_CHECKS_WHEN_SHORT))

        try:
            slot, reference = writer.write(encode_into, when_short)
        except OSError as exc:  # ENOSPC from posix_fallocate, EMFILE, ...: nothing was put yet
            if isinstance(exc, SaintpipeError):  # Redis away while looking for free slots: not a slot problem
                raise
            if not self._slot_failure_logged:
                self._slot_failure_logged = True
                log.warning(
                    "pool job %s: cannot write a shared-memory slot under %s (%s); putting subgraph bytes "
                    "in Redis until a slot can be written again (raise the size of /dev/shm, or lower the "
                    "pool's capacity)", self.job_id, shared_memory.SHM_DIR, exc,
                )
            return None
        self._slot_failure_logged = False
        return self._new_put([reference], writer, slot)

    def _slots(self) -> shared_memory.SlotWriter:
        if self._slot_writer is None or self._slot_fork != _FORKS[0]:  # a forked child writes its own slots
            self._slot_writer = shared_memory.SlotWriter(self.url, self.job_id)
            self._slot_fork = _FORKS[0]
        return self._slot_writer

    def _slot_checks(self, entry_ids: list[str]) -> list[list]:
        return [pack("XRANGE", self.stream_key, eid, eid) for eid in entry_ids]

    def _reclaim_slots(self, writer: shared_memory.SlotWriter, entry_ids: list[str]) -> None:
        """Ask Redis which of these entries have left the stream; their slots are free again."""
        if entry_ids:
            replies = self._run(self._slot_checks(entry_ids), "look for free shared-memory slots")
            writer.gone([eid for eid, entry in zip(entry_ids, replies) if not entry])

    def _new_put(
        self, parts: list, writer: shared_memory.SlotWriter | None = None, slot: int | None = None
    ) -> _Put:
        """Frame one round trip: SET the bytes (expiring, in case this producer dies while waiting), then
        PUT, which first acknowledges what ack(wait=False) queued. A shared-memory producer's reference
        goes in one PUT_REFERENCE, which also says whether its oldest entries have left the stream (their
        slots are then free)."""
        upload = self._new_bytes_key()
        keys = [*self._entry_keys, upload]
        acks = self._take_acks()
        if writer is not None:
            checked = writer.oldest(_SLOT_CHECKS_PER_PUT)
            commands = [self._scripts["PUT_REFERENCE"].command(
                keys, [*self._put_args, parts[0], len(checked), *checked, *acks])]
        else:
            checked = []
            commands = [
                pack("SET", upload, parts, "PX", _UPLOAD_TTL_MS),
                self._scripts["PUT"].command(keys, [*self._put_args, *acks]),
            ]
        return _Put(upload, keys, commands, acks, parts, checked, writer, slot)

    def _answer(self, put: _Put) -> None:
        """Get the first round trip's replies (read those already sent, else send): sets ``put.result``."""
        replies = None
        exchange, put.exchange = put.exchange, None
        if exchange is not None:
            try:
                replies = raise_first_error(_scripts_known(exchange.replies()))
            except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.NoScriptError):
                # Whether it ran is unknown, or nothing ran (a restarted Redis forgot the scripts): sent again
                # below, as a failed round trip of _run would be.
                replies = None
            except redis.ResponseError as exc:
                self._requeue_acks(put.acks)
                raise translate_error(self.url, exc) from None
        if replies is None:
            try:
                replies = self._run(put.commands, "put a subgraph")
            except BaseException:
                self._requeue_acks(put.acks)
                raise
        if put.writer is None:
            put.result = replies[1]
        else:
            put.result, *present = replies[0]
            if put.checked:
                put.writer.gone([eid for eid, held in zip(put.checked, present) if not held])

    def _room(self, put: _Put, timeout: float | None, *, keep: bool) -> str:
        """Wait while the pool is full until ``put`` is added; its entry id.

        On a timeout, ``keep`` leaves the put as it is (to be tried again); else it is given up.
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        poll = _POLL_MIN
        try:
            while True:
                result = put.result
                if isinstance(result, bytes):
                    entry_id = result.decode()
                    self._conclude(put, entry_id)
                    return entry_id
                if result == -1:  # the upload vanished (a restart, or it expired): send it again
                    # SET and PUT again; the acknowledgements and slot checks went with the first round trip.
                    again = [pack("SET", put.upload, put.parts, "PX", _UPLOAD_TTL_MS),
                             self._scripts["PUT"].command(put.keys, self._put_args)]
                    put.result = self._run(again, "put a subgraph")[1]
                    continue
                if result is not None:  # the number held: full
                    if deadline is not None and time.monotonic() >= deadline:
                        raise SaintpipeTimeout(
                            f"subgraph pool of job {self.job_id!r} stayed full for {timeout:g} s: {result} "
                            f"unacknowledged entries held, capacity {self.capacity}. Are trainers consuming "
                            "and acknowledging?"
                        )
                    time.sleep(poll if deadline is None else min(poll, max(0.0, deadline - time.monotonic())))
                    poll = min(poll * 2, _POLL_MAX)
                put.result = self._eval("PUT", put.keys, self._put_args, "put a subgraph")
        except SaintpipeTimeout:
            if keep:
                put.result = None  # ask again first thing next time
            else:
                self._conclude(put, None)
            raise
        except BaseException:
            self._conclude(put, None)
            raise

    def _conclude(self, put: _Put, entry_id: str | None) -> None:
        """A put is over: its slot holds an entry (``entry_id``), or it was not added and is given up."""
        if put.writer is not None and put.slot is not None:
            if entry_id is None:
                put.writer.release(put.slot)
            else:
                put.writer.committed(put.slot, entry_id)
            put.slot = None
        if entry_id is None:
            self._discard(put.upload)

    def _new_bytes_key(self) -> str:
        """A key no other pool object, process or call uses: a random token of this object, and a counter."""
        if self._fork_generation != _FORKS[0]:  # a forked child must not reuse its parent's names
            self._key_token, self._fork_generation = secrets.token_hex(8), _FORKS[0]
        return f"{self._upload_prefix}{self._key_token}-{next(self._key_counter)}"

    def _discard(self, upload: str) -> None:
        """Best effort: remove an upload that never made it into the stream (its expiry covers failures)."""
        try:
            self._client.unlink(upload)
        except redis.RedisError:
            pass

    # -- consuming ---------------------------------------------------------------------------------------

    def get(self, consumer: str, timeout: float | None = None) -> PoolEntry | None:
        """Take one entry for ``consumer``: an abandoned one first, else the oldest undelivered.

        Abandoned entries (held past the visibility timeout) are looked for first
        at most every ``min(1 s, visibility_timeout / 4)`` per pool object, and
        always when no new entry is waiting.

        Args:
            consumer: this trainer's name, unique among the job's live trainers.
            timeout: seconds to wait for an entry; ``None`` waits forever, ``0`` does not wait.

        Returns:
            The entry, or ``None`` when none arrived in time. Acknowledge it with
            ``ack`` after training on it.

        Raises:
            DecodeError: the entry was malformed; it has been removed (counted as malformed).
        """
        if not consumer:
            raise InvalidArgument("consumer name must be non-empty")
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            now = time.monotonic()
            abandoned_first = now >= self._next_claim
            if abandoned_first:
                self._next_claim = now + self._claim_interval
            # One round trip: the GET script (first acknowledging what ack(wait=False) queued) moves the
            # entry's bytes to a key named here, then GET them.
            dest = self._new_bytes_key()
            acks = self._take_acks()
            args = [GROUP, consumer, self._min_idle_ms, int(abandoned_first), *acks]
            try:
                (eid, deliveries, present, acked), payload = self._run(
                    [self._scripts["GET"].command([*self._entry_keys, dest], args), pack("GET", dest)],
                    "get a subgraph",
                )
            except BaseException:
                self._requeue_acks(acks)
                raise
            if acked != len(acks):
                self._note_stale_acks(len(acks) - acked, len(acks))
            if eid:  # nil (or false, depending on the protocol) when there is none
                entry = self._entry(consumer, eid.decode(), int(deliveries), payload if present else None)
            else:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                block = self._block_slice if remaining is None else min(self._block_slice, remaining)
                read = self._blocking_read(consumer, block)
                entry = self._entry(consumer, *read) if read else None
            if entry is not None:
                return entry

    def _blocking_read(
        self, consumer: str, seconds: float
    ) -> tuple[str, int, memoryview | bytes | None] | None:
        """Wait up to ``seconds`` for a new entry; returns (id, deliveries, bytes) or None."""
        block = pack(
            "XREADGROUP",
            "GROUP",
            GROUP,
            consumer,
            "COUNT",
            1,
            "BLOCK",
            max(1, int(seconds * 1000)),
            "STREAMS",
            self.stream_key,
            ">",
        )
        try:
            reply = self._run([block], "wait for a subgraph")[0]
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            return None  # the stream vanished (restart or delete_job); the next GET script recreates it
        if not reply:
            return None
        # RESP3 answers {stream: entries}, RESP2 [[stream, entries]].
        entries = next(iter(reply.values())) if isinstance(reply, dict) else reply[0][1]
        entry_id, fields = entries[0]
        # A new entry's bytes are still under the key its producer named (field k).
        key = fields[fields.index(b"k") + 1]
        return entry_id.decode(), 1, self._run([pack("GET", key)], "fetch a subgraph")[0]

    def _entry(
        self, consumer: str, eid: str, deliveries: int, payload: memoryview | bytes | None
    ) -> PoolEntry | None:
        """Decode the bytes of a delivered entry; None if another consumer took it over meanwhile."""
        try:
            if payload is not None and shared_memory.is_reference(payload):
                reference, payload = payload, shared_memory.read(payload)  # ConfigError: not readable here
                if payload is None:
                    raise DecodeError(
                        f"its shared-memory slot {shared_memory.SlotReference.parse(reference).name} is gone"
                    )
            if payload is None:
                raise DecodeError("its bytes are missing from Redis")
            return PoolEntry(entry_id=eid, subgraph=decode_owned(payload), deliveries=deliveries)
        except DecodeError as exc:
            # Only while this consumer still holds it: another may have taken it over in between.
            removed = self._eval(
                "ACK", self._entry_keys, [GROUP, "malformed", consumer, eid], "drop a malformed entry"
            )
            if not removed:
                if payload is None:
                    return None
                raise DecodeError(
                    f"pool job {self.job_id!r} entry {eid} was malformed (another consumer holds it now): {exc}"
                ) from None
            log.error("pool job %s: removed malformed entry %s: %s", self.job_id, eid, exc)
            raise DecodeError(
                f"pool job {self.job_id!r} entry {eid} was malformed and has been removed: {exc}"
            ) from None

    def ack(self, entry_id: str, *, wait: bool = True) -> bool | None:
        """Acknowledge an entry after training on it; it is deleted from Redis.

        Args:
            entry_id: the id of an entry a consumer got.
            wait: ``True``: acknowledge now and say whether it was pending.
                ``False``: queue the acknowledgement; it travels in the same write
                as this pool object's next call (typically the next ``get``, so
                Redis applies it just before choosing the next entry), or at the
                latest after ``min(0.1 s, visibility_timeout / 4)`` from a
                background thread, or in ``close()``. This spares a round trip per
                subgraph. If the process dies first, the entry comes back after
                the visibility timeout (at least once, as for any crash).

        Returns:
            With ``wait``: True, or False when it was no longer pending (another
            consumer that took it over acknowledged it first, or a Redis restart
            lost it). Without: None (the outcome is only logged).
        """
        if not wait:
            self._queue_ack(entry_id)
            return None
        done = self._eval(
            "ACK", self._entry_keys, [GROUP, "acknowledged", "", entry_id], "acknowledge a subgraph"
        )
        if not done:
            log.debug("pool job %s: entry %s was not pending when acknowledged", self.job_id, entry_id)
        return bool(done)

    def flush_acks(self) -> None:
        """Send the acknowledgements queued by ``ack(wait=False)`` now, all in one round trip.

        For a consumer that acknowledges a batch of entries at once (one
        ``ack(wait=False)`` each, then this), rather than one round trip apiece.
        """
        with self._lock:
            queued = bool(self._acks)
        if queued:
            self._run([], "acknowledge subgraphs")

    def _queue_ack(self, entry_id: str) -> None:
        with self._lock:
            if not self._acks:
                self._acks_since = time.monotonic()
            self._acks.append(entry_id)
            if self._flusher != _FORKS[0]:  # none yet, or we are a forked child (threads do not survive)
                self._flusher = _FORKS[0]
                threading.Thread(
                    target=_flush_loop,
                    args=(weakref.ref(self), self._closed, self._ack_delay),
                    name=f"pool-acks-{self.job_id}",
                    daemon=True,
                ).start()

    def _flush_due(self) -> None:
        """Send queued acknowledgements that no round trip has carried within ``_ack_delay``."""
        with self._lock:
            due = bool(self._acks) and time.monotonic() - self._acks_since >= self._ack_delay
        if due:
            try:
                self._run([], "acknowledge subgraphs")
            except (redis.RedisError, SaintpipeError) as exc:  # still queued: the next call sends them
                log.warning("pool job %s: could not send queued acknowledgements: %s", self.job_id, exc)

    def touch(self, consumer: str, entry_id: str) -> bool:
        """Restart the visibility timeout of an entry ``consumer`` holds (for steps longer than it).

        Returns:
            False when the consumer no longer holds the entry (it was taken over).
        """
        return bool(self._eval("TOUCH", self._keys, [GROUP, consumer, entry_id], "extend a lease"))

    # -- inspecting and cleaning up ----------------------------------------------------------------------

    def stats(self) -> PoolStats:
        """A consistent snapshot of the job's counters and sizes."""
        held, pending, produced, acked, redelivered, malformed = (
            int(v or 0) for v in self._eval("STATS", self._keys, [GROUP], "read pool stats")
        )
        return PoolStats(
            depth=held - pending,
            pending=pending,
            produced=produced,
            acknowledged=acked,
            redelivered=redelivered,
            malformed=malformed,
            capacity=self.capacity,
        )

    def delete_job(self) -> int:
        """Remove everything this job stored in Redis (entries, their bytes, group, counters).

        Call it once the job's producers and consumers have stopped: a later
        ``put`` or ``get`` starts the job afresh.

        Returns:
            The number of Redis keys removed.
        """

        def delete() -> int:
            removed = self._client.delete(*self._entry_keys)
            batch: list[bytes] = []
            for key in self._client.scan_iter(match=f"{self._upload_prefix}*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    removed += self._client.unlink(*batch)
                    batch = []
            if batch:
                removed += self._client.unlink(*batch)
            return removed

        removed = int(self._call(delete, "delete the job"))
        if self._slot_writer is not None:  # its slots are swept below: a later put starts with new ones
            self._slot_writer.close()
            self._slot_writer = None
        swept = shared_memory.sweep(self.url, self.job_id)
        if swept:
            log.info("pool job %s: removed %d shared-memory slots", self.job_id, swept)
        return removed

    # -- plumbing ----------------------------------------------------------------------------------------

    def _run(self, commands: list[list], what: str) -> list:
        """One round trip of packed commands, with reconnects and scripts reloaded after a restart.

        Acknowledgements queued by ``ack(wait=False)`` go first, in the same write.
        """
        try:
            return self._attempt(commands)
        except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.NoScriptError):
            pass  # the reconnect loop below tries again (as it would after its own first failure)
        except redis.ResponseError as exc:
            raise translate_error(self.url, exc) from None

        def attempt_with_scripts() -> list:
            try:
                return self._attempt(commands)
            except redis.exceptions.NoScriptError:
                for script in self._scripts.values():
                    self._client.script_load(script.text)
                return self._attempt(commands)

        return self._call(attempt_with_scripts, what)

    def _attempt(self, commands: list[list]) -> list:
        acks = self._take_acks()
        sent = [self._ack_command(acks), *commands] if acks else commands
        try:
            replies = self._conns.exchange(sent, raise_errors=False)
        except BaseException:
            self._requeue_acks(acks)  # whether Redis ran them is unknown: acknowledging again is harmless
            raise
        try:
            _scripts_known(replies)
        except redis.exceptions.NoScriptError:
            self._requeue_acks(acks)  # nothing ran (a restarted Redis forgot the scripts): sent again
            raise
        if acks:
            done = replies[0]
            replies = replies[1:]
            if isinstance(done, redis.RedisError):
                log.warning("pool job %s: queued acknowledgements failed: %s", self.job_id, done)
            elif done != len(acks):
                self._note_stale_acks(len(acks) - done, len(acks))
        return raise_first_error(replies)

    def _take_acks(self) -> list[str]:
        with self._lock:
            acks, self._acks = self._acks, []
        return acks

    def _requeue_acks(self, acks: list[str]) -> None:
        if acks:
            with self._lock:
                if not self._acks:
                    self._acks_since = time.monotonic()
                self._acks[:0] = acks

    def _note_stale_acks(self, stale: int, sent: int) -> None:
        log.debug(
            "pool job %s: %d of %d queued acknowledgements found their entry not pending",
            self.job_id,
            stale,
            sent,
        )

    def _ack_command(self, ids: list[str]) -> list:
        return self._scripts["ACK"].command(self._entry_keys, [GROUP, "acknowledged", "", *ids])

    def _eval(self, name: str, keys: list, args: list, what: str):
        return self._run([self._scripts[name].command(keys, args)], what)[0]

    def _call(self, fn, what: str):
        return call_with_reconnect(
            fn, url=self.url, policy=self.reconnect, what=f"{what} (job {self.job_id!r})"
        )

    def close(self) -> None:
        """Send queued acknowledgements, then close the connections (entries stay in Redis)."""
        self._closed.set()
        if self._pending is not None:
            try:
                self.abandon()
            except (redis.RedisError, SaintpipeError) as exc:
                log.warning("pool job %s: could not settle the last put on close: %s", self.job_id, exc)
        try:
            self.flush_acks()
        except (redis.RedisError, SaintpipeError) as exc:  # they come back after the visibility timeout
            log.warning("pool job %s: could not send queued acknowledgements on close: %s", self.job_id, exc)
        finally:
            if self._slot_writer is not None:
                self._slot_writer.close()
            self._conns.close()
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"SubgraphPool({redact_url(self.url)}, job_id={self.job_id!r}, capacity={self.capacity}, "
            f"transport={self.transport!r})"
        )


def _scripts_known(replies: list) -> list:
    """``replies``, or NoScriptError when Redis answered that it does not know a script (nothing ran)."""
    if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
        raise redis.exceptions.NoScriptError("a restarted Redis has forgotten the pool's scripts")
    return replies


def _copy_into(data: bytes, allocate) -> int:
    allocate(len(data))[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return len(data)
