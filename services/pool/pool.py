"""``SubgraphPool``: a bounded, Redis-stream-backed pool of sampled subgraphs for one training job.

Producers (samplers) ``put`` subgraphs; consumers (trainers) ``get`` one,
train on it, then ``ack`` it. Each job is one Redis stream with one consumer
group for its trainers, so every entry goes to exactly one trainer. An entry a
trainer got but never acknowledged (the trainer died) goes to another trainer
once it has been idle for ``visibility_timeout`` seconds; ``stats()`` counts
these redeliveries. The pool is bounded: with ``capacity`` unacknowledged
entries held, ``put`` waits; nothing unconsumed is ever trimmed or dropped.

Every call survives a Redis restart: it retries with exponential backoff and
raises :class:`~saintpipe.errors.ServiceUnavailable` only when Redis stays
unreachable for ``reconnect_timeout`` seconds. See docs/pool.md for what a
restart of a non-persistent Redis loses.

Example::

    with SubgraphPool(url, job_id="cora-gcn", capacity=64) as pool:
        pool.put(subgraph)
        entry = pool.get("trainer-0", timeout=5.0)
        train_step(entry.subgraph)
        pool.ack(entry.entry_id)
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import time
from dataclasses import dataclass
from typing import Self

import redis

from saintpipe.errors import DecodeError, InvalidArgument, SaintpipeTimeout
from services.pool import scripts
from services.pool.codec import decode_subgraph, encode_subgraph_parts
from services.pool.config import JOB_ID_PATTERN, PoolConfig
from services.pool.connection import ReconnectPolicy, call_with_reconnect, make_client, redact_url
from services.pool.resp import pack, roundtrip
from services.subgraph import Subgraph

log = logging.getLogger(__name__)

GROUP = "trainers"
KEY_PREFIX = "saintpipe:pool:"
# Longest single blocking read; between reads the consumer looks for entries to reclaim.
_MAX_BLOCK_SLICE = 1.0
# A producer facing a full pool polls from this interval, doubling up to the maximum.
_POLL_MIN, _POLL_MAX = 0.002, 0.05
# An upload waiting for room expires this long after its producer stops renewing it (it died).
_UPLOAD_TTL_MS = 120_000


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


class _Script:
    """A Lua script called by its SHA, loaded again when a restarted Redis has forgotten it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    def command(self, keys: list, args: list) -> list:
        return pack("EVALSHA", self.sha, len(keys), *keys, *args)


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

    Raises:
        InvalidArgument: a bad job id, capacity or timeout.
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
        self.stream_key = f"{KEY_PREFIX}{{{job_id}}}:stream"
        self.counters_key = f"{KEY_PREFIX}{{{job_id}}}:counters"
        self._keys = [self.stream_key, self.counters_key]
        self._upload_prefix = f"{KEY_PREFIX}{{{job_id}}}:sg:"
        self._put_args = [GROUP, self.capacity, _UPLOAD_TTL_MS]
        self._min_idle_ms = max(1, int(self.visibility_timeout * 1000))
        # A blocking read must end before the socket times out.
        self._block_slice = min(_MAX_BLOCK_SLICE, self.visibility_timeout / 2, socket_timeout / 2)
        self._client = make_client(url, socket_timeout=socket_timeout)
        self._scripts = {
            name: _Script(getattr(scripts, name)) for name in ("PUT", "GET", "ACK", "TOUCH", "STATS")
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
            InvalidArgument: the subgraph is malformed.
        """
        return self._put_parts(encode_subgraph_parts(sg), timeout)

    def put_encoded(self, data: bytes, timeout: float | None = None) -> str:
        """Like ``put`` for a subgraph already encoded with ``encode_subgraph``."""
        return self._put_parts([data], timeout)

    def _put_parts(self, parts: list, timeout: float | None) -> str:
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        upload = f"{self._upload_prefix}{secrets.token_hex(12)}"
        added = False
        try:
            # One round trip: SET the bytes (expiring, in case this producer dies while waiting), then PUT.
            upload_and_put = [
                pack("SET", upload, parts, "PX", _UPLOAD_TTL_MS),
                self._scripts["PUT"].command([*self._keys, upload], self._put_args),
            ]
            result = self._run(upload_and_put, "put a subgraph")[1]
            poll = _POLL_MIN
            while True:
                if isinstance(result, bytes):
                    added = True
                    return result.decode()
                if result == -1:  # the upload vanished (a restart, or it expired): send it again
                    result = self._run(upload_and_put, "put a subgraph")[1]
                    continue
                if deadline is not None and time.monotonic() >= deadline:
                    raise SaintpipeTimeout(
                        f"subgraph pool of job {self.job_id!r} stayed full for {timeout:g} s: {result} "
                        f"unacknowledged entries held, capacity {self.capacity}. Are trainers consuming and "
                        "acknowledging?"
                    )
                time.sleep(poll if deadline is None else min(poll, max(0.0, deadline - time.monotonic())))
                poll = min(poll * 2, _POLL_MAX)
                result = self._eval("PUT", [*self._keys, upload], self._put_args, "put a subgraph")
        finally:
            if not added:
                self._discard(upload)

    def _discard(self, upload: str) -> None:
        """Best effort: remove an upload that never made it into the stream (its expiry covers failures)."""
        try:
            self._client.unlink(upload)
        except redis.RedisError:
            pass

    # -- consuming ---------------------------------------------------------------------------------------

    def get(self, consumer: str, timeout: float | None = None) -> PoolEntry | None:
        """Take one entry for ``consumer``: an abandoned one first, else the oldest undelivered.

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
            found = self._eval("GET", self._keys, [GROUP, consumer, self._min_idle_ms], "get a subgraph")
            if found:
                payload = self._run([pack("GET", found[1])], "fetch a subgraph")[0]
                entry = self._entry(found[0].decode(), int(found[2]), payload)
            else:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                block = self._block_slice if remaining is None else min(self._block_slice, remaining)
                read = self._call(lambda b=block: self._blocking_read(consumer, b), "wait for a subgraph")
                entry = self._entry(*read) if read else None
            if entry is not None:
                return entry

    def _blocking_read(self, consumer: str, seconds: float) -> tuple[str, int, bytes | None] | None:
        """Wait up to ``seconds`` for a new entry; returns (id, deliveries, bytes) or None."""
        try:
            reply = self._client.xreadgroup(
                GROUP, consumer, {self.stream_key: ">"}, count=1, block=max(1, int(seconds * 1000))
            )
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            return None  # the stream vanished (restart or delete_job); the next GET script recreates it
        if not reply:
            return None
        entry_id, fields = reply[0][1][0]
        return entry_id.decode(), 1, self._client.get(fields[b"k"])

    def _entry(self, eid: str, deliveries: int, payload: bytes | None) -> PoolEntry | None:
        """Decode the bytes of a delivered entry; None if another consumer finished it meanwhile."""
        try:
            if payload is None:
                raise DecodeError("its bytes are missing from Redis")
            return PoolEntry(entry_id=eid, subgraph=decode_subgraph(payload), deliveries=deliveries)
        except DecodeError as exc:
            removed = self._eval("ACK", self._keys, [GROUP, eid, "malformed"], "drop a malformed entry")
            if payload is None and not removed:
                return None  # taken over and acknowledged by another consumer between our two calls
            log.error("pool job %s: removed malformed entry %s: %s", self.job_id, eid, exc)
            raise DecodeError(
                f"pool job {self.job_id!r} entry {eid} was malformed and has been removed: {exc}"
            ) from None

    def ack(self, entry_id: str) -> bool:
        """Acknowledge an entry after training on it; it is deleted from Redis.

        Returns:
            True, or False when it was no longer pending (another consumer that
            took it over acknowledged it first, or a Redis restart lost it).
        """
        done = self._eval("ACK", self._keys, [GROUP, entry_id, "acknowledged"], "acknowledge a subgraph")
        if not done:
            log.debug("pool job %s: entry %s was not pending when acknowledged", self.job_id, entry_id)
        return bool(done)

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
            removed = self._client.delete(*self._keys)
            batch: list[bytes] = []
            for key in self._client.scan_iter(match=f"{self._upload_prefix}*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    removed += self._client.unlink(*batch)
                    batch = []
            if batch:
                removed += self._client.unlink(*batch)
            return removed

        return int(self._call(delete, "delete the job"))

    # -- plumbing ----------------------------------------------------------------------------------------

    def _run(self, commands: list[list], what: str) -> list:
        """One round trip of packed commands, with reconnects and scripts reloaded after a restart."""

        def attempt() -> list:
            try:
                return roundtrip(self._client, commands)
            except redis.exceptions.NoScriptError:
                for script in self._scripts.values():
                    self._client.script_load(script.text)
                return roundtrip(self._client, commands)

        return self._call(attempt, what)

    def _eval(self, name: str, keys: list, args: list, what: str):
        return self._run([self._scripts[name].command(keys, args)], what)[0]

    def _call(self, fn, what: str):
        return call_with_reconnect(
            fn, url=self.url, policy=self.reconnect, what=f"{what} (job {self.job_id!r})"
        )

    def close(self) -> None:
        """Close the connections (entries stay in Redis)."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SubgraphPool({redact_url(self.url)}, job_id={self.job_id!r}, capacity={self.capacity})"
