"""A subgraph pool inside one process: subgraphs go through a real pool on their way to the training loop.

For experiments that train in this process (``saintpipe bench accuracy``) but must read their subgraphs the
way training does: a private ``redis-server``, a producer thread that puts one subgraph per seed in seed
order into a :class:`~saintpipe.services.pool.pool.SubgraphPool` (transport ``auto``: shared memory), and a
:class:`~saintpipe.minibatch.feed.PoolFeed` that gets, decodes and acknowledges them. One producer and one
consumer, so the loop sees the subgraphs in seed order: the same run as drawing them directly.

Example::

    with InProcessPool(sampler, seeds, graph.gather) as feed:
        result = loop.run(feed)
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from saintpipe.core.errors import SaintpipeTimeout
from saintpipe.minibatch.feed import Item, PoolFeed

if TYPE_CHECKING:
    from saintpipe.services.pool.pool import PoolStats, SubgraphPool
    from saintpipe.services.pool.redis_server import RedisServer
    from saintpipe.services.sampler.sampler import Sampler

log = logging.getLogger(__name__)

CONSUMER = "trainer-0"
# A single consumer that is alive: nothing to take over, even during a long evaluation.
VISIBILITY_TIMEOUT_S = 3600.0
# How long one put may wait for room before the producer checks whether it should stop.
_PUT_SLICE_S = 0.25
# How long one read of the feed may wait before the producer's health is checked (when nothing came).
_GET_SLICE_S = 0.5
_JOBS = itertools.count()


class InProcessPool:
    """Subgraphs of ``sampler`` for ``seeds``, put into a pool by a thread of this process and read back by a feed.

    Args:
        sampler: draws the subgraphs (``sample(seed, job_id=, sequence=)``); used by the producer thread only.
        seeds: the seed of each successive subgraph (e.g. ``subgraph_seed(job_seed, 0, i)`` for i = 0, 1, ...).
        gather: feature rows for an id array (e.g. an in-memory graph's ``gather``).
        redis_url: an existing Redis (shared by several runs: each has its own job); default: start a
            private one for this run.
        capacity: subgraphs the pool holds, unacknowledged ones included, before the producer waits.
        transport: where the producer leaves the bytes (``auto``: shared memory on a loopback Redis).
        prefetch: the feed fetches the next subgraph while the current step computes (as a trainer does).
        job_id: the pool's job (default: a fresh one for this process).

    Use once, as a context manager; it yields the feed to hand to the training loop.
    """

    def __init__(
        self,
        sampler: Sampler,
        seeds: Iterable[int],
        gather: Callable[[np.ndarray], np.ndarray],
        *,
        redis_url: str | None = None,
        capacity: int = 16,
        transport: str = "auto",
        prefetch: bool = True,
        job_id: str | None = None,
    ) -> None:
        self.sampler, self.seeds, self.gather = sampler, iter(seeds), gather
        self.capacity, self.prefetch = capacity, prefetch
        self.job_id = job_id or f"inprocess-{os.getpid()}-{next(_JOBS)}"
        self.produced = 0
        self._wanted_transport = transport
        self._given_url = redis_url
        self._url = redis_url
        self._server: RedisServer | None = None
        self._producer_pool: SubgraphPool | None = None
        self._consumer_pool: SubgraphPool | None = None
        self._feed: ProducedFeed | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._failure: BaseException | None = None

    @property
    def transport(self) -> str:
        """Where the producer leaves the bytes, resolved (``shared_memory`` or ``redis``; once started)."""
        if self._producer_pool is None:
            raise RuntimeError("InProcessPool has not been started")
        return self._producer_pool.transport

    def stats(self) -> PoolStats:
        """The pool's counters (produced, acknowledged, redelivered, ...; once started)."""
        if self._consumer_pool is None:
            raise RuntimeError("InProcessPool has not been started")
        return self._consumer_pool.stats()

    # -- start and stop ------------------------------------------------------------------------------------

    def start(self) -> ProducedFeed:
        """Start Redis (unless given), the pool objects and the producer thread; return the feed."""
        from saintpipe.services.pool.pool import SubgraphPool
        from saintpipe.services.pool.redis_server import RedisServer

        try:
            if self._url is None:
                # Started from this (the caller's) thread: the server dies with the thread that started it.
                self._server = RedisServer(use_env=False).start()
                self._url = self._server.url
            self._producer_pool = SubgraphPool(self._url, self.job_id, capacity=self.capacity,
                                               visibility_timeout=VISIBILITY_TIMEOUT_S,
                                               transport=self._wanted_transport)
            self._consumer_pool = SubgraphPool(self._url, self.job_id, capacity=self.capacity,
                                               visibility_timeout=VISIBILITY_TIMEOUT_S)
            log.debug("in-process pool %s on %s (transport %s)", self.job_id, self._url,
                      self._producer_pool.transport)
            self._thread = threading.Thread(target=self._produce, name=f"producer-{self.job_id}", daemon=True)
            self._thread.start()
            self._feed = ProducedFeed(PoolFeed(self._consumer_pool, CONSUMER, self.gather, prefetch=self.prefetch),
                                      self)
        except BaseException:
            self.close()
            raise
        return self._feed

    def close(self) -> None:
        """Stop the producer and the feed, delete the job's keys and slots, stop a private Redis."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._feed is not None:
            self._feed.inner.close()
            self._feed = None
        try:
            if self._producer_pool is not None:
                try:
                    self._producer_pool.delete_job()  # the keys, and this host's slots of the job
                finally:
                    self._producer_pool.close()
            if self._consumer_pool is not None:
                self._consumer_pool.close()
        finally:
            self._producer_pool = self._consumer_pool = None
            if self._url is not None:
                from saintpipe.services.pool.shared_memory import sweep

                sweep(self._url, self.job_id)  # whatever a failed delete left
            if self._server is not None:
                self._server.stop()
                self._server = None
                self._url = self._given_url

    def __enter__(self) -> ProducedFeed:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the producer thread -------------------------------------------------------------------------------

    def _produce(self) -> None:
        pool = self._producer_pool
        try:
            if pool is None:  # start() opens it before this thread (what `None.put` raised before)
                raise AttributeError("the in-process pool has no producer connection")
            for sequence, seed in enumerate(self.seeds):
                subgraph = self.sampler.sample(seed, job_id=self.job_id, sequence=sequence)
                while True:
                    if self._stop.is_set():
                        return
                    try:
                        pool.put(subgraph, timeout=_PUT_SLICE_S)
                        break
                    except SaintpipeTimeout:  # full: the trainer has not caught up yet
                        continue
                self.produced += 1
        except BaseException as exc:  # noqa: BLE001 - raised in the training thread by the feed
            self._failure = exc
            log.error("in-process pool %s: the producer failed: %s", self.job_id, exc)

    def raise_if_failed(self) -> None:
        """Raise the producer thread's exception, if it had one."""
        if self._failure is not None:
            raise self._failure


class ProducedFeed:
    """The trainer's :class:`PoolFeed`; once the pool runs dry after the producer failed, it raises that failure
    (within a fraction of a second) instead of waiting out the timeout."""

    def __init__(self, inner: PoolFeed, source: InProcessPool) -> None:
        self.inner, self.source = inner, source

    def next(self, timeout: float) -> Item:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.inner.next(max(0.0, min(_GET_SLICE_S, deadline - time.monotonic())))
            except SaintpipeTimeout:
                self.source.raise_if_failed()
                if time.monotonic() >= deadline:
                    raise

    def close(self) -> None:
        self.inner.close()
