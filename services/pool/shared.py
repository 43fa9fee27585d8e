"""What the parts of a ``SubgraphPool`` share: the job's Redis names, the types callers get, the fork count."""

from __future__ import annotations

import itertools
import logging
import os
import secrets
from dataclasses import dataclass

from saintpipe.core.subgraph import Subgraph

# Every part logs under the name the pool object always logged under, so logging settings still apply.
log = logging.getLogger("saintpipe.services.pool.pool")

GROUP = "trainers"
KEY_PREFIX = "saintpipe:pool:"

# Bumped in a forked child: what a parent made (key names, slot files, the flush thread) is not the child's.
FORKS = [0]
os.register_at_fork(after_in_child=lambda: FORKS.__setitem__(0, FORKS[0] + 1))


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
        redelivered: deliveries of entries taken back from a trainer that held them too long
            (or recovered by a restarted trainer of the same name).
        dead_lettered: entries removed without being trained on and recorded in the dead-letter
            stream: they did not decode, their bytes were gone, or they were delivered more than
            ``max_deliveries`` times. At any quiet moment
            ``produced == acknowledged + depth + pending + dead_lettered``.
        capacity: this pool object's capacity (depth + pending never exceeds it).
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
    """

    entry_id: str
    reason: str
    consumer: str
    deliveries: int
    time: float


class JobKeys:
    """The Redis keys of one job (see ``scripts``), and fresh names for the keys of subgraph bytes."""

    def __init__(self, job_id: str) -> None:
        self.stream = f"{KEY_PREFIX}{{{job_id}}}:stream"
        self.counters = f"{KEY_PREFIX}{{{job_id}}}:counters"
        self.at = f"{KEY_PREFIX}{{{job_id}}}:at"
        self.dead = f"{KEY_PREFIX}{{{job_id}}}:dead"
        self.stream_and_counters = [self.stream, self.counters]  # KEYS of STATS and TOUCH
        self.entry = [self.stream, self.counters, self.at]  # KEYS of the others, before the bytes' key
        self.entry_and_dead = [*self.entry, self.dead]  # KEYS of DEAD; every fixed key of the job
        self.upload_prefix = f"{KEY_PREFIX}{{{job_id}}}:sg:"
        self._token, self._counter, self._fork = secrets.token_hex(8), itertools.count(), FORKS[0]

    def new_bytes_key(self) -> str:
        """A key no other pool object, process or call uses: a random token of this object, and a counter."""
        if self._fork != FORKS[0]:  # a forked child must not reuse its parent's names
            self._token, self._fork = secrets.token_hex(8), FORKS[0]
        return f"{self.upload_prefix}{self._token}-{next(self._counter)}"
