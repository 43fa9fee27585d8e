"""Where a consumer's subgraphs and their features come from: a trainer's, or a user's loader's.

A feed hands out :class:`Item` s: a subgraph, its feature rows and a callback
that acknowledges it once the step that used it is done.

* :class:`PoolFeed`: gets a subgraph from the Redis pool, gathers its rows (from the feature service in
  production; from an in-memory graph in the accuracy experiment, :mod:`saintpipe.bench.accuracy.local_pool`),
  and with ``prefetch`` does both for the next subgraph on a background thread while the current step
  computes.

The trainer takes subgraphs only through the pool's client: it never samples.
Entries that arrive as node sets (pool wire ``nodes``) are induced again by the
feed's ``expand`` (:class:`saintpipe.minibatch.expand.SubgraphExpander`) inside the
pool's ``get``, on the prefetch thread, so every item holds a whole subgraph.

Every item carries how long its subgraph took to arrive (``sample_wait_s``: the pool was empty) and how long
its features took (``fetch_s``); the loop measures separately how long it actually waited.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from saintpipe.core.errors import SaintpipeTimeout
from saintpipe.core.subgraph import Subgraph, SubgraphNodes

log = logging.getLogger(__name__)


@dataclass
class Item:
    """One subgraph ready for a step."""

    subgraph: Subgraph
    features: np.ndarray
    sample_wait_s: float
    fetch_s: float
    ack: Callable[[], object]
    deliveries: int = 1
    entry_id: str = ""  # the pool entry's id (saintpipe.loader hands it to its callers)


class Feed(Protocol):
    def next(self, timeout: float) -> Item:
        """The next item; raises SaintpipeTimeout when none arrives within ``timeout`` seconds."""

    def close(self) -> None:
        """Stop background work and release connections (unacknowledged items go back to the pool)."""


class PoolFeed:
    """Subgraphs from a :class:`saintpipe.services.pool.pool.SubgraphPool`, features from ``gather``.

    Args:
        pool: the job's pool.
        consumer: this trainer's consumer name (unique among the job's trainers).
        gather: feature rows for an id array, in request order (``FeatureClient.gather``, or an
            in-memory graph's ``EvalGraph.gather``).
        prefetch: fetch the next subgraph and its features on a background
            thread while the current step computes.
        get_timeout: seconds one pool read may block before the thread checks for shutdown.
        expand: induces entries that came as node sets (``SubgraphExpander`` over the trainer's
            dataset); None: such an entry raises ConfigError (it stays in the pool).
    """

    def __init__(
        self,
        pool,
        consumer: str,
        gather: Callable[[np.ndarray], np.ndarray],
        *,
        prefetch: bool = True,
        get_timeout: float = 1.0,
        expand: Callable[[SubgraphNodes], Subgraph] | None = None,
    ) -> None:
        self.pool, self.consumer, self.gather, self.expand = pool, consumer, gather, expand
        self.prefetch, self.get_timeout = prefetch, get_timeout
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        # Set while the prefetch thread gathers features: the subgraph has arrived, and a gather that rides
        # through a feature-shard restart ends by its own deadline, so the consumer keeps waiting for it.
        self._gathering = threading.Event()
        self._thread: threading.Thread | None = None
        if prefetch:
            self._thread = threading.Thread(target=self._run, name=f"prefetch-{consumer}", daemon=True)
            self._thread.start()

    def _fetch_one(self, deadline: float | None) -> Item | None:
        start = time.perf_counter()
        entry = None
        while entry is None and not self._stop.is_set():
            slice_s = (
                self.get_timeout if deadline is None else min(self.get_timeout, deadline - time.monotonic())
            )
            if slice_s <= 0:
                return None
            entry = self.pool.get(self.consumer, timeout=slice_s, expand=self.expand)
        if entry is None:
            return None
        got = time.perf_counter()
        self._gathering.set()
        try:
            feats = self.gather(entry.subgraph.node_ids)
        finally:
            self._gathering.clear()
        entry_id = entry.entry_id
        return Item(
            entry.subgraph,
            feats,
            got - start,
            time.perf_counter() - got,
            # Queued: it travels with this pool object's next get (the prefetch), sparing a round trip.
            ack=lambda: self.pool.ack(entry_id, wait=False),
            deliveries=entry.deliveries,
            entry_id=entry_id,
        )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item: Item | BaseException | None = self._fetch_one(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the training thread, which raises it
                item = exc
            if item is None:
                continue
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if isinstance(item, BaseException):
                return

    def next(self, timeout: float) -> Item:
        item: Item | BaseException | None
        if not self.prefetch:
            item = self._fetch_one(time.monotonic() + timeout)
        else:
            item = self._wait_for_item(timeout)
        if item is None:
            raise SaintpipeTimeout(
                f"trainer {self.consumer}: no subgraph from pool job {self.pool.job_id!r} "
                f"within {timeout:g} s (are the samplers running?)"
            )
        if isinstance(item, BaseException):
            raise item
        return item

    def _wait_for_item(self, timeout: float) -> Item | BaseException | None:
        """The prefetched item; None when the pool had none for ``timeout`` s (time spent gathering excluded)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._queue.get(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            except queue.Empty:
                if self._gathering.is_set():
                    deadline = max(deadline, time.monotonic() + 0.5)
                elif time.monotonic() >= deadline:
                    return None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.get_timeout + 5.0)


def take_back(pool, name: str) -> int:
    """What consumer ``name`` held unacknowledged before it was restarted, delivered to it again at once.

    A restarted trainer (a Ray actor, a container, a pod) or loader comes back under its old name; without
    this its subgraphs would wait out the pool's visibility timeout. Returns how many there were.
    """
    recovered = pool.recover(name)
    if recovered:
        log.info("%s: %d unacknowledged subgraph(s) of its previous life delivered again", name, recovered)
    return recovered
