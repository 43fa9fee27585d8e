"""A consumer's connections to the pipeline: the job's pool, the feature client, and the feed over them.

A trainer (:mod:`saintpipe.trainer.assemble`) and a user's loader
(:mod:`saintpipe.loader.session`) open the same three things the same way:
:class:`PoolInputs` is that one way. The feed starts only when asked
(:meth:`PoolInputs.start_feed`), after the consumer has built what it needs
(a trainer its model, its data-parallel group): a prefetch thread started
earlier would hold a subgraph unacknowledged through a slow start-up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from saintpipe.minibatch.feed import PoolFeed, take_back

if TYPE_CHECKING:
    from saintpipe.services.dataset.store import Dataset
    from saintpipe.services.feature_shard.cache import CacheConfig
    from saintpipe.services.pool.config import PoolConfig
    from saintpipe.services.feature_shard.client import FeatureClient
    from saintpipe.services.feature_shard.security import ClientSecurity
    from saintpipe.services.pool.pool import SubgraphPool


class PoolInputs:
    """The pool and the feature client of consumer ``consumer``; its :class:`PoolFeed` once started.

    Args:
        dataset: the opened dataset (node-set entries are induced on its topology; degrees for the cache).
        consumer: this consumer's name in the job's pool (unique among its live consumers).
        features: feature shard addresses (``"h:p;h:p"``, replica lists, or a manifest path).
        pool: the job's pool settings, ``job_id`` included.
        redis_url: the pool's Redis.
        shared_memory, retry_deadline_s, security: the feature client's transport choice, how long it rides
            through a shard's restart, its TLS and token (``[trainer] feature_*``).
        prefetch: fetch the next subgraph and its features while the current one is used.
        cache: the feature client's trainer-side cache, or None.
        group: the pool's consumer group this consumer reads in (None: the job's default group); a sweep's
            trial, or a loader sharing the stream with others, reads in a group of its own
            (:meth:`~saintpipe.services.pool.pool.SubgraphPool.add_group`).

    Raises:
        ServiceUnavailable: Redis or a feature shard cannot be reached (nothing stays open).
    """

    def __init__(self, dataset: Dataset, *, consumer: str, features: Sequence[Sequence[str]] | str | Path,
                 pool: PoolConfig, redis_url: str,
                 shared_memory: str = "auto", retry_deadline_s: float = 60.0,
                 security: ClientSecurity | None = None, prefetch: bool = True,
                 cache: CacheConfig | None = None, group: str | None = None) -> None:
        from saintpipe.services.feature_shard.client import FeatureClient
        from saintpipe.services.pool.pool import SubgraphPool

        self.dataset, self.consumer, self.prefetch = dataset, consumer, prefetch
        self.client: FeatureClient | None = None
        self.pool: SubgraphPool | None = None
        self.feed: PoolFeed | None = None
        try:
            self.client = FeatureClient(features, name=consumer, cache=cache,
                                        degrees=dataset.degrees() if cache and cache.static_rows else None,
                                        shared_memory=shared_memory, retry_deadline_s=retry_deadline_s,
                                        security=security)
            self.pool = (SubgraphPool.from_config(pool, url=redis_url) if group is None
                         else SubgraphPool.from_config(pool, url=redis_url, group=group))
        except BaseException:
            self.close()
            raise

    def start_feed(self, gather: Callable[[np.ndarray], np.ndarray] | None = None) -> PoolFeed:
        """Take back what this consumer held before, then start the feed (features through ``gather``;
        default the feature client's)."""
        from saintpipe.minibatch.expand import SubgraphExpander

        if self.pool is None or self.client is None:  # closed (what their None's attributes raised before)
            raise AttributeError("these PoolInputs are closed")
        take_back(self.pool, self.consumer)
        self.feed = PoolFeed(self.pool, self.consumer, gather or self.client.gather, prefetch=self.prefetch,
                             expand=SubgraphExpander(self.dataset))
        return self.feed

    def close(self) -> None:
        """Stop the prefetch thread, send queued acknowledgements, close the connections. Idempotent."""
        parts = (self.client, self.pool, self.feed)
        self.feed = self.pool = self.client = None
        with contextlib.ExitStack() as closing:  # last in, first closed; each even when another's close fails
            for part in parts:
                if part is not None:
                    closing.callback(part.close)
