"""The Redis key names of a pool job (the stream, its consumer groups, fresh keys for subgraph bytes).

Also what keeps fresh names fresh across ``fork`` (the fork count) and the logger every part of a
``SubgraphPool`` logs under. The types callers get back are in :mod:`saintpipe.services.pool.records`.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets

# Every part logs under the name the pool object always logged under, so logging settings still apply.
log = logging.getLogger("saintpipe.services.pool.pool")

# The default consumer group: a job's only one unless groups are registered (SubgraphPool.add_group).
# job_keys.lua names it too (its counters and records carry no suffix).
GROUP = "trainers"
KEY_PREFIX = "saintpipe:pool:"

# Bumped in a forked child: what a parent made (key names, slot files, the flush thread) is not the child's.
FORKS = [0]
os.register_at_fork(after_in_child=lambda: FORKS.__setitem__(0, FORKS[0] + 1))


class JobKeys:
    """The Redis keys of one job (see ``scripts``) and the consumer group of one pool object, and fresh names
    for the keys of subgraph bytes."""

    def __init__(self, job_id: str, group: str = GROUP) -> None:
        self.group = group  # the consumer group a pool object gets, acknowledges and reports for
        self.stream = f"{KEY_PREFIX}{{{job_id}}}:stream"
        self.counters = f"{KEY_PREFIX}{{{job_id}}}:counters"
        self.at = f"{KEY_PREFIX}{{{job_id}}}:at"
        self.dead = f"{KEY_PREFIX}{{{job_id}}}:dead"
        self.groups = f"{KEY_PREFIX}{{{job_id}}}:groups"
        self.stream_and_counters = [self.stream, self.counters]  # KEYS of TOUCH
        self.entry = [self.stream, self.counters, self.at]  # KEYS of the others, before the bytes' key
        self.entry_and_dead = [*self.entry, self.dead]  # KEYS of DEAD
        self.fixed = [*self.entry_and_dead, self.groups]  # every fixed key of the job
        self.stats = [self.stream, self.counters, self.groups]  # KEYS of STATS and ADD_GROUP
        self.remove_group = [*self.entry, self.groups]  # KEYS of REMOVE_GROUP
        self.upload_prefix = f"{KEY_PREFIX}{{{job_id}}}:sg:"
        self._token, self._counter, self._fork = secrets.token_hex(8), itertools.count(), FORKS[0]

    def new_bytes_key(self) -> str:
        """A key no other pool object, process or call uses: a random token of this object, and a counter."""
        if self._fork != FORKS[0]:  # a forked child must not reuse its parent's names
            self._token, self._fork = secrets.token_hex(8), FORKS[0]
        return f"{self.upload_prefix}{self._token}-{next(self._counter)}"
