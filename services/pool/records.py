"""What a ``SubgraphPool`` hands its callers: an entry, a snapshot of the job's counts, a dead letter."""

from __future__ import annotations

from dataclasses import dataclass

from saintpipe.services.pool.keys import GROUP

from saintpipe.core.subgraph import Subgraph


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
    """A consistent snapshot of one job's pool, as one consumer group sees it (the job's only one by default).

    Attributes:
        depth: entries waiting for a trainer of the group (never delivered to it, or not yet reclaimed).
        pending: entries delivered to a trainer of the group and not yet acknowledged.
        produced: entries ever put (since the group joined, for a group added with ``add_group``).
        acknowledged: entries the group acknowledged (trained on).
        redelivered: deliveries of entries taken back from a trainer that held them too long
            (or recovered by a restarted trainer of the same name).
        dead_lettered: entries removed without being trained on and recorded in the dead-letter
            stream: they did not decode, their bytes were gone, or they were delivered more than
            ``max_deliveries`` times (by this group). At any quiet moment, for every group,
            ``produced == acknowledged + depth + pending + dead_lettered``.
        capacity: this pool object's capacity (depth + pending never exceeds it: entries held for
            any group count against it).
    """

    depth: int
    pending: int
    produced: int
    acknowledged: int
    redelivered: int
    dead_lettered: int
    capacity: int

    @property
    def held(self) -> int:
        """Unacknowledged entries stored: depth + pending."""
        return self.depth + self.pending


@dataclass(frozen=True)
class DeadLetter:
    """The record of one entry moved to the job's dead-letter stream instead of being trained on.

    Attributes:
        entry_id: the entry's id in the job's stream.
        reason: why, in a few words ("its bytes are missing from Redis", "delivered 5 times without
            acknowledgement", the decoder's message, ...).
        consumer: the consumer that held it when it was moved.
        deliveries: how many times it had been delivered.
        time: when it was moved (Redis's clock, seconds since the epoch).
        group: the consumer group that dead-lettered it (other groups of the job still get the entry).
    """

    entry_id: str
    reason: str
    consumer: str
    deliveries: int
    time: float
    group: str = GROUP


@dataclass(frozen=True)
class GroupConsumer:
    """One consumer of a consumer group, as Redis last saw it (``SubgraphPool.consumers``).

    Attributes:
        group: the consumer group.
        name: the consumer (a trainer's, a loader's or a trial's name).
        idle_s: seconds since it last got an entry (from Redis 7.2 on: since it last asked for one, even in
            vain): a trainer that trains keeps this near 0.
        pending: entries delivered to it and not acknowledged yet.
    """

    group: str
    name: str
    idle_s: float
    pending: int
