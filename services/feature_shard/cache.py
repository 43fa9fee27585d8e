"""Trainer-side feature cache: a static part (the highest-degree nodes) plus an LRU part.

Why it pays (Cooperative Minibatching, section 4.2): consecutive minibatches overlap, so an LRU cache
turns their temporal locality into fewer fetched rows; high-degree nodes land in almost every subgraph, so
pinning them (the static part) removes the most frequent misses outright.

A direct map ``slot_of[node]`` (int32, -1 = not cached, 4 bytes per node: every host holds O(N) topology
anyway) makes a lookup one numpy gather. Slots ``[0, static_rows)`` hold the pinned nodes; the rest are
the LRU part, evicted by last-use tick (one tick per lookup). Eviction works in bulk: once the LRU part is
full, its least recently used eighth (or what one insert needs) is freed by one ``argpartition``, so the
pass over every LRU slot is paid once per ``lru_rows / 8`` inserted rows rather than per insert.
"""

from __future__ import annotations

import threading

import numpy as np
import pydantic

from saintpipe.core.config import StrictModel
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.feature_shard import metrics


class CacheConfig(StrictModel):
    """Sizes of the trainer-side cache, in rows."""

    static_rows: int = pydantic.Field(
        0, ge=0, le=2**31 - 1, description="pinned rows: the highest-degree nodes (needs degrees)"
    )
    lru_rows: int = pydantic.Field(0, ge=0, le=2**31 - 1, description="rows kept by least-recent use")

    @property
    def enabled(self) -> bool:
        return self.static_rows + self.lru_rows > 0


def top_degree_nodes(degrees: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` nodes of highest degree, ascending by id (ties broken by lower id)."""
    degrees = np.asarray(degrees)
    k = min(int(k), degrees.size)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    # Sort by (-degree, id) so equal degrees prefer lower ids: deterministic.
    order = np.lexsort((np.arange(degrees.size), -degrees.astype(np.int64)))
    return np.sort(order[:k]).astype(np.int64)


class FeatureCache:
    """Rows of a ``[num_nodes, feature_dim]`` float32 matrix, cached by node id. Thread-safe.

    Args:
        num_nodes: nodes in the graph (ids are ``[0, num_nodes)``).
        feature_dim: row width.
        static_ids: node ids to pin (unique); their rows are given in ``static_rows``.
        static_rows: float32 ``[len(static_ids), feature_dim]``.
        lru_rows: capacity of the LRU part.
        name: the ``trainer`` label of the hit/miss metrics.

    Example::

        cache = FeatureCache(n, f, static_ids=ids, static_rows=rows, lru_rows=10_000)
        out = np.empty((len(req), f), np.float32)
        hit = cache.lookup(req, out)          # fills out[hit]
        ...fetch req[~hit] into out...
        cache.insert(np.unique(req[~hit]), fetched_rows)
    """

    def __init__(
        self,
        num_nodes: int,
        feature_dim: int,
        *,
        static_ids: np.ndarray | None = None,
        static_rows: np.ndarray | None = None,
        lru_rows: int = 0,
        name: str = "trainer",
    ) -> None:
        static_ids = np.empty(0, np.int64) if static_ids is None else np.asarray(static_ids, dtype=np.int64)
        if static_rows is None:
            static_rows = np.empty((0, feature_dim), np.float32)
        if static_rows.shape != (static_ids.size, feature_dim):
            raise InvalidArgument(
                f"static rows have shape {static_rows.shape}, expected ({static_ids.size}, {feature_dim})"
            )
        if np.unique(static_ids).size != static_ids.size:
            raise InvalidArgument("static ids must be unique")
        if lru_rows < 0:
            raise InvalidArgument(f"lru_rows must be >= 0, got {lru_rows}")
        self.num_nodes, self.feature_dim, self.name = num_nodes, feature_dim, name
        self.num_static, self.num_lru = int(static_ids.size), int(lru_rows)
        capacity = self.num_static + self.num_lru
        self._rows = np.empty((capacity, feature_dim), dtype=np.float32)
        self._rows[: self.num_static] = static_rows
        self._slot_of = np.full(num_nodes, -1, dtype=np.int32)
        self._slot_of[static_ids] = np.arange(self.num_static, dtype=np.int32)
        self._owner = np.full(capacity, -1, dtype=np.int64)  # node held by each slot
        self._owner[: self.num_static] = static_ids
        self._last_used = np.zeros(self.num_lru, dtype=np.int64)  # tick of each LRU slot
        self._filled = 0  # LRU slots ever taken; [num_static, num_static + _filled), minus the freed ones
        self._freed = np.empty(0, dtype=np.int64)  # LRU slots evicted in bulk and not yet taken again
        self._tick = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        self._hits_metric = metrics.CACHE_HITS.labels(name)
        self._misses_metric = metrics.CACHE_MISSES.labels(name)

    def __len__(self) -> int:
        return self.num_static + self._filled - self._freed.size

    def lookup(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Copy the cached rows of ``ids`` into ``out`` (same length) and return the hit mask.

        Hits and misses are counted per requested row (duplicates count each time).
        """
        with self._lock:
            self._tick += 1
            slots = self._slot_of[ids]
            hit: np.ndarray = slots >= 0
            hit_slots = slots[hit]
            if hit_slots.size:
                out[hit] = self._rows[hit_slots]
                lru = hit_slots[hit_slots >= self.num_static] - self.num_static
                self._last_used[lru] = self._tick
            n_hit = int(hit_slots.size)
            self.hits += n_hit
            self.misses += ids.size - n_hit
        self._hits_metric.inc(n_hit)
        self._misses_metric.inc(ids.size - n_hit)
        return hit

    def insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Add rows of unique ``ids`` to the LRU part, evicting the least recently used.

        Ids already cached are skipped; when more ids arrive than the LRU part
        holds, the last ``lru_rows`` of them are kept.
        """
        if self.num_lru == 0 or ids.size == 0:
            return
        with self._lock:
            new = self._slot_of[ids] < 0
            ids, rows = ids[new], rows[new]
            if ids.size > self.num_lru:
                ids, rows = ids[-self.num_lru :], rows[-self.num_lru :]
            n = ids.size
            if n == 0:
                return
            free = min(n, self.num_lru - self._filled)
            slots = np.arange(self._filled, self._filled + free, dtype=np.int64)
            self._filled += free
            if n > free:  # every LRU slot has been taken: reuse freed ones, freeing more in bulk when short
                slots = np.concatenate([slots, self._take_freed(n - free, slots)])
            absolute = slots + self.num_static
            self._owner[absolute] = ids
            self._slot_of[ids] = absolute.astype(np.int32)
            self._rows[absolute] = rows
            self._last_used[slots] = self._tick

    def _take_freed(self, need: int, just_filled: np.ndarray) -> np.ndarray:
        """``need`` free LRU slots: freed ones first; when short, the least recently used eighth of the LRU
        part (at least what is missing) is evicted at once and the rest kept for later inserts."""
        if self._freed.size < need:
            missing = need - self._freed.size
            never = np.iinfo(np.int64).max
            # Freed slots and those just filled are not candidates: rank them last.
            self._last_used[self._freed] = never
            self._last_used[just_filled] = never
            count = min(self.num_lru - self._freed.size - just_filled.size, max(missing, self.num_lru // 8))
            victims = np.argpartition(self._last_used, count - 1)[:count]
            self._slot_of[self._owner[self.num_static + victims]] = -1
            self._owner[self.num_static + victims] = -1
            self._freed = np.concatenate([self._freed, victims])
        taken, self._freed = self._freed[:need], self._freed[need:]
        return taken

    def stats(self) -> dict[str, float]:
        """Hits, misses, hit rate and occupancy."""
        with self._lock:
            total = self.hits + self.misses
            return {
                "cache_hits": self.hits,
                "cache_misses": self.misses,
                "cache_hit_rate": self.hits / total if total else 0.0,
                "cache_static_rows": self.num_static,
                "cache_lru_rows": self._filled - self._freed.size,
                "cache_lru_capacity": self.num_lru,
            }
