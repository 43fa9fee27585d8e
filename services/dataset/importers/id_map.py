"""Original node ids <-> dense ids ``0..N-1``, in sorted id order.

Integer ids that are non-negative and not much larger than their count are
remapped through a dense table indexed by id (one gather per lookup,
O(occurrences + largest id)); other ids (negative, sparse, strings) through
the sorted distinct ids and a binary search. :class:`IdCollector` builds the
same map from ids that arrive in blocks (a streamed edge list), keeping a
presence bitmap while the ids stay dense enough.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numba import njit

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers import sidefiles
from saintpipe.services.dataset.csr import sorted_unique

__all__ = ["DENSE_SPAN", "IdCollector", "IdMap"]

# Integer ids up to this many times the number of id occurrences (plus a little) go through the dense
# table: 9 bytes per possible id (a presence flag, then an int64 rank).
DENSE_SPAN = 4


def _dense_bound(count: int) -> int:
    return DENSE_SPAN * count + 1024


class IdMap:
    """Original node ids (sorted, distinct) <-> dense ids 0..N-1.

    ``rank``: for integer ids that are non-negative and not much larger than their count, the dense id of
    every possible id (-1: absent), so that a lookup is one gather; None: lookups binary-search ``ids``.
    """

    def __init__(self, ids: np.ndarray, rank: np.ndarray | None = None):
        self.ids, self.rank = ids, rank

    @classmethod
    def of(cls, keys: list[np.ndarray]) -> IdMap:
        """The map of every id occurring in ``keys`` (arrays of the same kind: integers or strings)."""
        if all(k.dtype.kind in "iu" for k in keys):
            collector = IdCollector()
            for k in keys:
                collector.add(k)
            return collector.id_map()
        return cls(sorted_unique(np.concatenate(keys)))

    @classmethod
    def from_present(cls, present: np.ndarray) -> IdMap:
        """The dense-table map of the ids ``i`` with ``present[i]``."""
        ids = np.flatnonzero(present).astype(np.int64)
        # int32 when the ids allow (dense ids index int32 CSR columns anyway): half the table's cache footprint.
        dtype = np.int32 if ids.size < 2**31 else np.int64
        rank = np.full(present.size, -1, dtype=dtype)
        rank[ids] = np.arange(ids.size, dtype=dtype)
        return cls(ids, rank)

    def lookup(self, keys: np.ndarray, where: str) -> np.ndarray:
        """The dense ids (int64) of ``keys``.

        Raises:
            DatasetError: a key that is not in the map, naming ``where``.
        """
        if self.rank is not None:
            pos = np.empty(keys.size, dtype=np.int64)
            first_missing = _dense_lookup(self.rank, np.ascontiguousarray(keys, dtype=np.int64), pos)
        else:
            pos = np.minimum(np.searchsorted(self.ids, keys), self.ids.size - 1).astype(np.int64, copy=False)
            missing = np.flatnonzero(self.ids[pos] != keys)
            first_missing = int(missing[0]) if missing.size else -1
        if first_missing >= 0:
            bad = keys[first_missing]
            raise DatasetError(f"{where}: node id {sidefiles.show_id(bad)} does not occur in the edge list or the "
                               "feature/label files")
        return pos


class IdCollector:
    """The distinct integer ids of arrays added one at a time, then their :class:`IdMap`.

    A presence bitmap serves while every id is non-negative and below ``DENSE_SPAN`` times the number
    of ids added so far, or ``expected`` ids (a caller's estimate of the total: the first blocks of a
    stream are few ids against the largest); the first block that breaks this turns it into sorted
    distinct ids, which later blocks are merged into (linear merges, no re-sort of what was
    collected). The map is dense by the same rule as :meth:`IdMap.of`, on the final count.
    """

    def __init__(self, expected: int = 0) -> None:
        self.expected = expected
        self.count = 0
        self.lo, self.hi = 0, -1  # the smallest and largest id added (hi < lo: none yet)
        self.present: np.ndarray | None = np.zeros(0, dtype=bool)
        self.distinct: np.ndarray | None = None

    def add(self, keys: np.ndarray) -> None:
        if keys.dtype.kind not in "iu":
            raise TypeError(f"IdCollector takes integer ids, got {keys.dtype}")
        if keys.size == 0:
            return
        self.count += keys.size
        lo, hi = _min_max(keys)
        self.lo, self.hi = (lo, hi) if self.hi < self.lo else (min(lo, self.lo), max(hi, self.hi))
        if self.present is not None:
            bound = _dense_bound(max(self.count, self.expected))
            if lo >= 0 and hi < bound:
                if hi >= self.present.size:
                    # Doubling keeps the copies O(final size) over a stream of growing ids.
                    grown = np.zeros(max(hi + 1, min(2 * self.present.size, bound)), dtype=bool)
                    grown[:self.present.size] = self.present
                    self.present = grown
                _mark(self.present, keys)
                return
            self.distinct = np.flatnonzero(self.present).astype(np.int64)
            self.present = None
        self.distinct = _merge_distinct(self.distinct, sorted_unique(keys.astype(np.int64, copy=False)))

    def id_map(self) -> IdMap:
        if self.present is None:  # then the distinct ids hold every id added
            return IdMap(cast(np.ndarray, self.distinct))
        if self.present.size > _dense_bound(self.count):  # the estimate was too high: no table that sparse
            return IdMap(np.flatnonzero(self.present).astype(np.int64))
        return IdMap.from_present(self.present)


@njit(cache=True, nogil=True)
def _dense_lookup(rank, keys, out):  # pragma: no cover - compiled
    """``out[i] = rank[keys[i]]``; the position of the first key outside the table or absent from it, or -1."""
    for i in range(keys.size):
        k = keys[i]
        if k < 0 or k >= rank.size or rank[k] < 0:
            return i
        out[i] = rank[k]
    return -1


@njit(cache=True, nogil=True)
def _min_max(keys):  # pragma: no cover - compiled
    lo = hi = keys[0]
    for i in range(1, keys.size):
        k = keys[i]
        if k < lo:
            lo = k
        elif k > hi:
            hi = k
    return lo, hi


@njit(cache=True, nogil=True)
def _mark(present, keys):  # pragma: no cover - compiled
    for i in range(keys.size):
        present[keys[i]] = True


@njit(cache=True, nogil=True)
def _merge_distinct(a, b):  # pragma: no cover - compiled
    """The sorted distinct union of two sorted distinct arrays."""
    out = np.empty(a.size + b.size, dtype=np.int64)
    i = j = n = 0
    while i < a.size or j < b.size:
        if j == b.size or (i < a.size and a[i] < b[j]):
            v = a[i]
            i += 1
        elif i == a.size or b[j] < a[i]:
            v = b[j]
            j += 1
        else:
            v = a[i]
            i += 1
            j += 1
        out[n] = v
        n += 1
    return out[:n].copy()
