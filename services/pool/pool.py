"""``SubgraphPool``: a bounded, Redis-stream-backed pool of sampled subgraphs for one training job.

Producers (samplers) ``put`` subgraphs; consumers (trainers) ``get`` one, train on it, then ``ack`` it.
Every entry goes to exactly one trainer of a consumer group; one a trainer got and never acknowledged
goes to another after ``visibility_timeout`` seconds. With ``capacity`` unacknowledged entries held,
``put`` waits; nothing unconsumed is ever dropped. An entry that cannot be trained on goes to the job's
dead-letter stream instead of failing the trainer that meets it. Fan-out (a sweep's trials sharing one
sampler fleet) registers one consumer group per trial with ``add_group``: each sees every entry once.

Every call survives a Redis restart (retries with backoff for ``reconnect_timeout`` seconds), and a call
sent again after its reply was lost does not take effect twice. ``transport`` says where a producer
leaves the bytes: in Redis, or in a same-host shared-memory slot the entry references. The method
docstrings below say the details; docs/explanation/pool.md says how it is built.

Example::

    with SubgraphPool(url, job_id="cora-gcn", capacity=64) as pool:
        pool.put(subgraph)
        entry = pool.get("trainer-0", timeout=5.0)
        train_step(entry.subgraph)
        pool.ack(entry.entry_id, wait=False)  # or pool.ack(entry.entry_id) -> bool
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Self

import numpy as np
import redis
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.accounting import Accounting
from saintpipe.services.pool.acks import AckQueue
from saintpipe.services.pool.config import JOB_ID_PATTERN, TRANSPORTS, WIRES, PoolConfig
from saintpipe.services.pool.connection import ReconnectPolicy, redact_url
from saintpipe.services.pool.consumer import Consumer
from saintpipe.services.pool.deadletter import DeadLetters
from saintpipe.services.pool.keys import GROUP, JobKeys, log
from saintpipe.services.pool.link import RedisLink
from saintpipe.services.pool.producer import PreparedPut, Producer
from saintpipe.services.pool.records import DeadLetter, GroupConsumer, PoolEntry, PoolStats
from saintpipe.services.pool.slots import ProducerSlots

from saintpipe.core.errors import InvalidArgument, SaintpipeError
from saintpipe.core.subgraph import Subgraph, SubgraphNodes

__all__ = [
    "DeadLetter",
    "GroupConsumer",
    "PoolEntry",
    "PoolStats",
    "PreparedPut",
    "SubgraphPool",
    "resolve_transport",
    "resolve_wire",
]


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


def resolve_wire(wire: str, transport: str) -> str:
    """``"full"`` or ``"nodes"``: what a producer whose bytes take ``transport`` (resolved) puts, for ``wire``.

    ``"auto"`` sends node sets where the bytes go through Redis (the cross-host path, where megabytes per
    subgraph cost the sampling core its encoding and sending, and Redis its CPU), and whole subgraphs into
    same-host shared memory, which carries them at the speed of the plain sampling loop with no work left
    for the trainer.

    Raises:
        InvalidArgument: an unknown wire or transport.
    """
    if wire not in WIRES:
        raise InvalidArgument(f"wire {wire!r}: use one of {', '.join(WIRES)}")
    if transport not in ("redis", "shared_memory"):
        raise InvalidArgument(f"transport {transport!r}: resolve it first (redis or shared_memory)")
    if wire == "auto":
        return "nodes" if transport == "redis" else "full"
    return wire


def _check_group(group: str) -> None:
    if not isinstance(group, str) or not re.match(JOB_ID_PATTERN, group):
        raise InvalidArgument(
            f"group {group!r}: use 1-128 letters, digits and _ . : - (starting with a letter or digit)"
        )


class SubgraphPool:
    """The pool of one training job on one Redis server.

    A thin facade: puts are a :class:`~saintpipe.services.pool.producer.Producer`'s,
    gets and acknowledgements a :class:`~saintpipe.services.pool.consumer.Consumer`'s,
    stats and deletion an :class:`~saintpipe.services.pool.accounting.Accounting`'s;
    all share one :class:`~saintpipe.services.pool.link.RedisLink` (the connections)
    and one :class:`~saintpipe.services.pool.acks.AckQueue`.

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
        wire: what the producers using this object put (:func:`resolve_wire`; ``wire`` holds the
            answer): ``"full"`` subgraphs, ``"nodes"`` (node sets that trainers induce again), or
            ``"auto"``. ``put`` takes either form whatever this says; consumers read both.
        max_deliveries: an entry delivered more often than this without an
            acknowledgement is dead-lettered instead of delivered again; 0: no limit.
        dead_letter_limit: about how many records the job's dead-letter stream keeps.
        group: the consumer group this object's gets, acknowledgements, recovery, dead letters and
            ``stats`` are for (letters, digits and ``_ . : -``). Other groups than the default one are
            registered with :meth:`add_group` (by any pool object of the job) before they consume.

    Raises:
        InvalidArgument: a bad job id, group, capacity, timeout, transport, wire or limit.
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
        wire: str = "auto",
        max_deliveries: int = 5,
        dead_letter_limit: int = 10_000,
        group: str = GROUP,
    ) -> None:
        if not isinstance(job_id, str) or not re.match(JOB_ID_PATTERN, job_id):
            raise InvalidArgument(
                f"job_id {job_id!r}: use 1-128 letters, digits and _ . : - (starting with a letter or digit)"
            )
        _check_group(group)
        if not isinstance(capacity, int) or capacity < 1:
            raise InvalidArgument(f"capacity {capacity!r}: must be an integer >= 1")
        if not visibility_timeout > 0:
            raise InvalidArgument(f"visibility_timeout {visibility_timeout!r}: must be > 0 seconds")
        if not isinstance(max_deliveries, int) or max_deliveries < 0:
            raise InvalidArgument(f"max_deliveries {max_deliveries!r}: must be an integer >= 0 (0: no limit)")
        if not isinstance(dead_letter_limit, int) or dead_letter_limit < 1:
            raise InvalidArgument(f"dead_letter_limit {dead_letter_limit!r}: must be an integer >= 1")
        self.url = url
        self.job_id = job_id
        self.capacity = capacity
        self.visibility_timeout = float(visibility_timeout)
        self.max_deliveries = max_deliveries
        self.reconnect = reconnect or ReconnectPolicy()
        self.transport = resolve_transport(transport, url)
        self.wire = resolve_wire(wire, self.transport)
        if self.transport == "shared_memory":
            shared_memory.require_available()
        self.group = group
        keys = JobKeys(job_id, group)
        self.stream_key, self.counters_key, self.at_key = keys.stream, keys.counters, keys.at
        self._link = RedisLink(url, job_id, self.reconnect, socket_timeout, keys, AckQueue(job_id))
        self._slots = ProducerSlots(url, job_id, keys.stream, self._link)
        self._producer = Producer(capacity, self.transport, self._link, self._slots)
        self._dead = DeadLetters(self._link, dead_letter_limit)
        self._consumer = Consumer(self.visibility_timeout, socket_timeout, self._link, self._dead, max_deliveries)
        self._accounting = Accounting(capacity, self._link, self._slots)
        self._link.call(self._link.client.ping, "connect")

    @classmethod
    def from_config(cls, config: PoolConfig, url: str | None = None, group: str = GROUP) -> SubgraphPool:
        """Build a pool from a :class:`PoolConfig` (``url`` overrides ``config.url``), for consumer ``group``."""
        url = url or config.url
        if url is None:
            raise InvalidArgument("pool config has no url: start a RedisServer and pass its url")
        reconnect = ReconnectPolicy(config.reconnect_initial_backoff, config.reconnect_max_backoff,
                                    config.reconnect_timeout)
        settings = config.model_dump(include={"capacity", "visibility_timeout", "socket_timeout", "transport", "wire",
                                              "max_deliveries", "dead_letter_limit"})
        return cls(url, config.job_id, reconnect=reconnect, group=group, **settings)

    # -- producing ---------------------------------------------------------------------------------------

    def put(self, sg: Subgraph | SubgraphNodes, timeout: float | None = None) -> str:
        """Encode ``sg`` and append it, waiting while the pool is full.

        Args:
            sg: the subgraph (leave its arrays unchanged until ``put`` returns: they are sent in place),
                or its node set (format_version 2, :mod:`saintpipe.services.pool.codec.compact`).
            timeout: seconds to wait for room; ``None`` waits forever, ``0`` does not wait.

        Returns:
            The new entry id.

        Raises:
            SaintpipeTimeout: the pool stayed full for ``timeout`` seconds.
            InvalidArgument: the subgraph is malformed, or a ``put_nowait`` is still unsettled.
        """
        return self._producer.put(sg, timeout)

    def put_encoded(self, data: bytes, timeout: float | None = None) -> str:
        """Like ``put`` for a subgraph already encoded with ``encode_subgraph``."""
        return self._producer.put_encoded(data, timeout)

    def put_nowait(self, sg: Subgraph | SubgraphNodes | PreparedPut) -> None:
        """Start a put and return without waiting for Redis's answer.

        Redis handles the put while the caller draws the next subgraph, instead
        of the caller idling for the round trip. :meth:`settle` then reads the
        answer (it has long arrived) and waits while the pool is full; every
        ``put_nowait`` must be settled before the next put of this object.

        Args:
            sg: a subgraph, a node set, or a put made ready by :meth:`prepare`. With the
                ``redis`` transport the arrays are sent in place: leave them
                unchanged until :meth:`settle` returns.

        Raises:
            InvalidArgument: the subgraph is malformed, or the previous ``put_nowait`` is unsettled.
        """
        self._producer.put_nowait(sg)

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
        return self._producer.prepare(write_into, or_else)

    def cancel(self, put: PreparedPut) -> None:
        """Give up a prepared put that was never sent (its slot is free again)."""
        self._producer.cancel(put)

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
        return self._producer.settle(timeout)

    def abandon(self) -> str | None:
        """Give up the pending ``put_nowait``, unless Redis already took it.

        Returns:
            The entry id when Redis had added it after all (it stays), else None.
        """
        return self._producer.abandon()

    @property
    def unsettled(self) -> bool:
        """Whether a ``put_nowait`` awaits :meth:`settle`."""
        return self._producer.unsettled

    # -- consuming ---------------------------------------------------------------------------------------

    def get(
        self,
        consumer: str,
        timeout: float | None = None,
        *,
        expand: Callable[[SubgraphNodes], Subgraph] | None = None,
    ) -> PoolEntry | None:
        """Take one entry for ``consumer``: an abandoned one first, else the oldest undelivered.

        Abandoned entries (held past the visibility timeout) are looked for first
        at most every ``min(1 s, visibility_timeout / 4)`` per pool object, and
        always when no new entry is waiting.

        Args:
            consumer: this trainer's name, unique among the job's live trainers.
            timeout: seconds to wait for an entry; ``None`` waits forever, ``0`` does not wait.
            expand: turns an entry of the compact form (a node set, pool wire ``nodes``) into its
                whole subgraph (the trainer's :class:`saintpipe.minibatch.expand.SubgraphExpander`).
                It raises DecodeError for an entry that cannot be trained on (dead-lettered like one
                that does not decode) and ConfigError where this consumer cannot expand it (left for
                another consumer, as below).

        Returns:
            The entry, or ``None`` when none arrived in time. Acknowledge it with
            ``ack`` after training on it. Entries that cannot be trained on (they
            do not decode, their bytes or shared-memory slot are gone, or they were
            delivered more than ``max_deliveries`` times) are moved to the
            dead-letter stream on the way (one warning each) and skipped.

        Raises:
            ConfigError: the entry's bytes are in shared memory this process cannot
                read (another host, another user), or it is a node set and ``expand``
                is None or cannot expand it (another dataset); it is left for another consumer.
            InvalidArgument: this object's ``group`` is not on the job's stream (removed with
                ``remove_group``, or never added); nothing is taken or changed. ``recover``, ``ack``,
                ``touch`` and ``stats`` raise it too.
        """
        return self._consumer.get(consumer, timeout, expand)

    def recover(self, consumer: str) -> int:
        """Take back at once what ``consumer`` holds unacknowledged, for a trainer restarted under that name.

        Call it once when the trainer starts, before its first ``get``: the
        entries its previous life got and never acknowledged would otherwise
        wait out the visibility timeout. Each is claimed again (delivery count
        incremented, counted as redelivered) and delivered, oldest first, by this
        object's next ``get`` calls for ``consumer``, before anything else.

        Returns:
            How many entries were taken back.
        """
        return self._consumer.recover(consumer)

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

        Raises:
            InvalidArgument: with ``wait``, the entry was not pending and this object's ``group`` is not
                on the job's stream (removed, or never added).
        """
        return self._consumer.ack(entry_id, wait=wait)

    def flush_acks(self) -> None:
        """Send the acknowledgements queued by ``ack(wait=False)`` now, all in one round trip.

        For a consumer that acknowledges a batch of entries at once (one
        ``ack(wait=False)`` each, then this), rather than one round trip apiece.
        """
        self._consumer.flush_acks()

    def touch(self, consumer: str, entry_id: str) -> bool:
        """Restart the visibility timeout of an entry ``consumer`` holds (for steps longer than it).

        Returns:
            False when the consumer no longer holds the entry (it was taken over).
        """
        return self._consumer.touch(consumer, entry_id)

    # -- inspecting and cleaning up ----------------------------------------------------------------------

    def stats(self, group: str | None = None) -> PoolStats:
        """A consistent snapshot of the job's counters and sizes, for ``group`` (default: this object's).

        Raises:
            InvalidArgument: a bad group name, or a group the job's stream does not have (removed, or never
                added); the default group answers anyway (a producer's pool object asks for it, and a job
                that fans out need not consume with it).
        """
        if group is not None:
            _check_group(group)
        return self._accounting.stats(group)

    def add_group(self, group: str) -> bool:
        """Register consumer group ``group`` of the job (a sweep's trial): it gets every entry put from now on.

        It starts at the stream's current end: entries added before it joined are never its own. From
        then on each entry is released only once every registered group has acknowledged or
        dead-lettered it. The default group is live only while no group is registered: a job that fans
        out registers every group that consumes, the default one too if it is used.

        Returns:
            False when it was registered already (nothing changes).

        Raises:
            InvalidArgument: a bad group name.
        """
        _check_group(group)
        return self._accounting.add_group(group)

    def remove_group(self, group: str) -> int:
        """Remove consumer group ``group`` (its trial stopped, finished or failed), in one atomic step.

        Every entry it had not acknowledged (delivered and pending, or never delivered to it) is released
        at once for it: deleted with its bytes (its shared-memory slot freed) when no other live group still
        needs it, which makes room for the producers. Its counters go too. A consumer of it still running
        gets InvalidArgument from then on.

        Only a registered group is removed, and only while another one stays registered; anything else
        is refused before anything changes. A group that is not registered was never counted in the
        entries (releasing them for it would take what the other groups still need). The job's last group
        (the last registered one, or the default group of a job with none registered) is not removed
        either: the producers would go on filling the stream with entries no group reads (a group added
        later starts at the stream's end) and then wait forever. To replace the last group, add the next
        one first; to end the job, ``delete_job``. Removing a group again (a call repeated after its
        answer was lost) changes nothing and returns 0; ``add_group`` may register it anew.

        Returns:
            How many entries were deleted (no other live group needed them); 0 when it was removed before.

        Raises:
            InvalidArgument: a bad group name; a group that is not registered (the message lists those
                that are); the job's last group.
        """
        _check_group(group)
        return self._accounting.remove_group(group)

    def groups(self) -> list[str]:
        """The registered consumer groups of the job, sorted; empty while it has only its default group."""
        return self._accounting.groups()

    def group_stats(self) -> dict[str, PoolStats]:
        """:meth:`stats` of every registered group (a sweep's trials), by name; of the default group
        (:data:`~saintpipe.services.pool.keys.GROUP`) alone while none is registered. A group removed between
        the listing and its read is left out (its trial ended)."""
        groups = self.groups()
        if not groups:
            return {GROUP: self.stats(GROUP)}
        out = {}
        for group in groups:
            try:
                out[group] = self.stats(group)
            except InvalidArgument:
                continue
        return out

    def consumers(self) -> dict[str, list[GroupConsumer]]:
        """Every consumer group the job's stream has (the default one too, once anything consumed or put),
        each with its consumers and how long ago each last got an entry: who still reads the job (a
        sweep run against a running stack looks here before it takes an unread group's place). Empty before
        the stream exists."""
        return self._accounting.consumers()

    def dead_letters(self, count: int = 100) -> list[DeadLetter]:
        """The newest ``count`` records of the job's dead-letter stream, oldest first.

        Raises:
            InvalidArgument: ``count`` < 1.
        """
        if not isinstance(count, int) or count < 1:
            raise InvalidArgument(f"count {count!r}: must be an integer >= 1")
        return self._dead.read(count)

    def delete_job(self) -> int:
        """Remove everything this job stored in Redis (entries, their bytes, group, counters, dead letters).

        Call it once the job's producers and consumers have stopped: a later
        ``put`` or ``get`` starts the job afresh.

        Returns:
            The number of Redis keys removed.
        """
        return self._accounting.delete_job()

    def close(self) -> None:
        """Send queued acknowledgements, then close the connections (entries stay in Redis)."""
        self._consumer.stop()
        if self._producer.unsettled:
            try:
                self._producer.abandon()
            except (redis.RedisError, SaintpipeError) as exc:
                log.warning("pool job %s: could not settle the last put on close: %s", self.job_id, exc)
        try:
            self._consumer.flush_acks()
        except (redis.RedisError, SaintpipeError) as exc:  # they come back after the visibility timeout
            log.warning("pool job %s: could not send queued acknowledgements on close: %s", self.job_id, exc)
        finally:
            self._producer.forget_now()
            self._slots.close()
            self._link.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"SubgraphPool({redact_url(self.url)}, job_id={self.job_id!r}, capacity={self.capacity}, "
            f"transport={self.transport!r}, wire={self.wire!r}"
            + (f", group={self.group!r})" if self.group != GROUP else ")")
        )
