"""The producer side of a pool object: framing puts, sending them (at once or pipelined), waiting for room."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import redis
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.codec import encode_subgraph_into, encode_subgraph_parts
from saintpipe.services.pool.codec.compact import encode_nodes
from saintpipe.services.pool.connection import translate_error
from saintpipe.services.pool.link import RedisLink, scripts_known
from saintpipe.services.pool.resp import PendingExchange, pack, raise_first_error
from saintpipe.services.pool.scripts import SCRIPTS
from saintpipe.services.pool.slots import SLOT_CHECKS_PER_PUT, ProducerSlots

from saintpipe.core.errors import InvalidArgument, SaintpipeTimeout
from saintpipe.core.subgraph import Subgraph, SubgraphNodes

# A producer facing a full pool polls from this interval, doubling up to the maximum.
_POLL_MIN, _POLL_MAX = 0.002, 0.05
# An upload waiting for room expires this long after its producer stops renewing it (it died).
_UPLOAD_TTL_MS = 120_000

_UNANSWERED = object()


@dataclass(eq=False)
class PreparedPut:
    """One put in progress (what SubgraphPool.prepare returns, for put_nowait): its upload key, its commands, and
    what Redis has answered so far."""

    upload: str
    keys: list
    commands: list
    acks: list[str]
    forgets: list[str]
    parts: list
    checked: list[str]
    writer: shared_memory.SlotWriter | None = None
    slot: int | None = None
    exchange: PendingExchange | None = None
    result: object = _UNANSWERED  # an entry id (bytes), the number held (full), -1 (upload gone), None (ask)


class Producer:
    """Puts of one pool object; ``SubgraphPool`` documents each public method.

    Args:
        capacity: most unacknowledged entries held.
        transport: ``"redis"`` or ``"shared_memory"`` (resolved).
        link: the pool object's round trips (its job, keys and queued acknowledgements too).
        slots: the shared-memory slots (used with that transport).
    """

    def __init__(self, capacity: int, transport: str, link: RedisLink, slots: ProducerSlots) -> None:
        self.job_id = link.job_id
        self.capacity = capacity
        self.transport = transport
        self._keys = keys = link.keys
        self._link = link
        self._conns = link.conns
        self._entry_keys = keys.entry
        self._acks = link.acks
        self._slots = slots
        self._pending: PreparedPut | None = None  # a put_nowait() to settle()
        self._put_args = [keys.group, capacity, _UPLOAD_TTL_MS]
        self._put_again = [*self._put_args, 0]  # PUT asked again for the same upload: nothing to forget
        # Uploads whose put's answer this object has read: it will never send them again, so Redis may
        # drop their records (put_entry.lua); the next put carries them.
        self._forgets: list[str] = []
        self._forgets_lock = threading.Lock()
        self._put = SCRIPTS["PUT"]
        self._put_reference = SCRIPTS["PUT_REFERENCE"]

    def put(self, sg: Subgraph | SubgraphNodes, timeout: float | None) -> str:
        self._require_settled()
        return self._put_now(self._prepare(sg), timeout)

    def put_encoded(self, data: bytes, timeout: float | None) -> str:
        self._require_settled()
        return self._put_now(self._bytes_put(data), timeout)

    def _put_now(self, put: PreparedPut, timeout: float | None) -> str:
        """One round trip for ``put``, then wait for room as long as ``timeout`` allows."""
        try:
            self._answer(put)
        except BaseException:
            self._conclude(put, None)
            raise
        return self._room(put, timeout, keep=False)

    def put_nowait(self, sg: Subgraph | SubgraphNodes | PreparedPut) -> None:
        self._require_settled()
        put = sg if isinstance(sg, PreparedPut) else self._prepare(sg)
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
        return self._slot_or_parts(write_into, lambda: encode_subgraph_parts(or_else()))

    def cancel(self, put: PreparedPut) -> None:
        if put is self._pending:
            raise InvalidArgument(f"pool job {self.job_id}: that put was sent; settle() or abandon() it")
        self._give_back(put)  # they were to travel with it
        if put.writer is not None and put.slot is not None:
            put.writer.release(put.slot)
            put.slot = None

    def settle(self, timeout: float | None) -> str | None:
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
        try:
            return self.settle(timeout=0)
        except SaintpipeTimeout:
            put, self._pending = self._pending, None
            if put is not None:
                self._conclude(put, None)
            return None

    @property
    def unsettled(self) -> bool:
        return self._pending is not None

    def _require_settled(self) -> None:
        if self._pending is not None:
            raise InvalidArgument(f"pool job {self.job_id}: settle() the previous put_nowait() first")

    def _prepare(self, sg: Subgraph | SubgraphNodes) -> PreparedPut:
        """Encode ``sg`` (into a shared-memory slot when that is the transport) and frame its put."""
        if isinstance(sg, SubgraphNodes):  # a few KB: one copy into a slot costs nothing to speak of
            return self._bytes_put(encode_nodes(sg))
        return self._slot_or_parts(lambda allocate: encode_subgraph_into(sg, allocate),
                                   lambda: encode_subgraph_parts(sg))

    def _bytes_put(self, data: bytes) -> PreparedPut:
        """The put of an encoded message (copied into a slot when that is the transport)."""
        return self._slot_or_parts(lambda allocate: _copy_into(data, allocate), lambda: [data])

    def _slot_or_parts(self, encode_into: Callable[[Callable[[int], np.ndarray]], int],
                       parts: Callable[[], list]) -> PreparedPut:
        """With the shared-memory transport, a put of a reference to the message ``encode_into`` writes into a
        slot; else, or when no slot is writable, a put of the pieces ``parts()`` returns."""
        written = self._slots.write(encode_into) if self.transport == "shared_memory" else None
        if written is None:
            return self._new_put(parts())
        writer, slot, reference = written
        return self._new_put([reference], writer, slot)

    def _new_put(
        self, parts: list, writer: shared_memory.SlotWriter | None = None, slot: int | None = None
    ) -> PreparedPut:
        """Frame one round trip: SET the bytes (expiring, in case this producer dies while waiting), then
        PUT, which first acknowledges what ack(wait=False) queued. A shared-memory producer's reference
        goes in one PUT_REFERENCE, which also says whether its oldest entries have left the stream (their
        slots are then free)."""
        upload = self._keys.new_bytes_key()
        keys = [*self._entry_keys, upload, self._keys.groups]
        acks = self._acks.take()
        with self._forgets_lock:
            forgets, self._forgets = self._forgets, []
        # SET NX: sent again after a lost answer, it must not touch bytes the entry already uses.
        if writer is not None:
            checked = writer.oldest(SLOT_CHECKS_PER_PUT)
            commands = [self._put_reference.command(
                keys, [*self._put_args, parts[0], len(checked), *checked, len(forgets), *forgets, *acks])]
        else:
            checked = []
            commands = [
                pack("SET", upload, parts, "PX", _UPLOAD_TTL_MS, "NX"),
                self._put.command(keys, [*self._put_args, len(forgets), *forgets, *acks]),
            ]
        return PreparedPut(upload, keys, commands, acks, forgets, parts, checked, writer, slot)

    def _give_back(self, put: PreparedPut) -> None:
        """The acknowledgements and forgets ``put`` carried go with the next call (whether they ran is
        unknown, and doing them twice is harmless)."""
        self._acks.requeue(put.acks)
        put.acks = []
        if put.forgets:
            with self._forgets_lock:
                self._forgets[:0] = put.forgets
            put.forgets = []

    def _answer(self, put: PreparedPut) -> None:
        """Get the first round trip's replies (read those already sent, else send): sets ``put.result``."""
        replies = None
        exchange, put.exchange = put.exchange, None
        if exchange is not None:
            try:
                replies = raise_first_error(scripts_known(exchange.replies()))
            except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.NoScriptError):
                # Whether it ran is unknown, or nothing ran (a restarted Redis forgot the scripts): sent again
                # below, as a failed round trip of RedisLink.run would be.
                replies = None
            except redis.ResponseError as exc:
                self._give_back(put)
                raise translate_error(self._link.url, exc) from None
        if replies is None:
            try:
                replies = self._link.run(put.commands, "put a subgraph")
            except BaseException:
                self._give_back(put)
                raise
        if put.writer is None:
            put.result = replies[1]
        else:
            put.result, *present = replies[0]
            if put.checked:
                put.writer.gone([eid for eid, held in zip(put.checked, present) if not held])

    def _room(self, put: PreparedPut, timeout: float | None, *, keep: bool) -> str:
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
                    again = [pack("SET", put.upload, put.parts, "PX", _UPLOAD_TTL_MS, "NX"),
                             self._put.command(put.keys, self._put_again)]
                    put.result = self._link.run(again, "put a subgraph")[1]
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
                put.result = self._link.eval("PUT", put.keys, self._put_again, "put a subgraph")
        except SaintpipeTimeout:
            if keep:
                put.result = None  # ask again first thing next time
            else:
                self._conclude(put, None)
            raise
        except BaseException:
            self._conclude(put, None)
            raise

    def _conclude(self, put: PreparedPut, entry_id: str | None) -> None:
        """A put is over: its slot holds an entry (``entry_id``), or it was not added and is given up."""
        if put.writer is not None and put.slot is not None:
            if entry_id is None:
                put.writer.release(put.slot)
            else:
                put.writer.committed(put.slot, entry_id)
            put.slot = None
        if entry_id is None:
            self._discard(put.upload)
        else:
            with self._forgets_lock:
                self._forgets.append(put.upload)

    def _discard(self, upload: str) -> None:
        """Best effort: give up an upload; if its entry was added after all, keep that (discard.lua).

        Its expiry covers a failure here; a record of an added entry left behind costs ~100 bytes.
        """
        with contextlib.suppress(redis.RedisError):
            self._link.client.eval(SCRIPTS["DISCARD"].text, 2, self._keys.at, upload)

    def forget_now(self) -> None:
        """Best effort, on close: drop the records of the puts whose answers this object has read."""
        with self._forgets_lock:
            forgets, self._forgets = self._forgets, []
        if forgets:
            with contextlib.suppress(redis.RedisError):
                self._link.client.hdel(self._keys.at, *forgets)


def _copy_into(data: bytes, allocate: Callable[[int], np.ndarray]) -> int:
    allocate(len(data))[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return len(data)
