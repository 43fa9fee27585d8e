"""Edge lists to sorted, deduplicated CSR (no Python loop over edges).

:func:`edges_to_csr` places every entry in its row by counting (one pass to
count, one to scatter), then sorts and deduplicates each row in place, in a
Numba kernel: O(E) work plus the rows' own sorts, and int32 scratch, where
sorting int64 keys ``row * N + col`` of all entries takes seconds and three
int64 arrays of them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.core.errors import DatasetError


def sorted_unique(values: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """The distinct values, ascending: ``np.unique(values)`` computed by one sort (``in_place``: of ``values``
    itself, one copy fewer than np.unique's two).

    numpy 2.4's ``np.unique`` goes through a hash table first, a hundred times slower than a sort and a
    neighbour comparison on millions of random int64 edge keys.
    """
    out = values if in_place else values.copy()
    out.sort()
    if out.size < 2:
        return out
    keep = np.empty(out.size, dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def edges_to_csr(
    src: np.ndarray, dst: np.ndarray, num_nodes: int, *, symmetrize: bool = True, drop_self_loops: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Build (indptr int64 [N+1], indices int32 [E]) from edge endpoint arrays.

    Duplicate edges are merged and every neighbour list comes out sorted
    ascending; with ``symmetrize`` each edge is stored in both directions.
    Peak memory is a few int64 arrays of the final edge count.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.shape != dst.shape or src.ndim != 1:
        raise DatasetError(f"edge endpoints must be two 1-D arrays of equal length, got {src.shape} and {dst.shape}")
    if num_nodes >= 2**31:
        raise DatasetError(f"{num_nodes} nodes do not fit int32 indices")
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise DatasetError(f"edge endpoint out of range [0, {num_nodes})")
    return _counting_csr(src, dst, num_nodes, symmetrize, drop_self_loops)


@njit(cache=True)
def _counting_csr(src, dst, n, symmetrize, drop_self_loops):  # pragma: no cover - compiled
    """CSR by counting: rows' sizes, entries scattered into their rows, each row sorted and deduplicated."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(src.size):
        u, v = src[i], dst[i]
        if drop_self_loops and u == v:
            continue
        indptr[u + 1] += 1
        if symmetrize:
            indptr[v + 1] += 1
    for r in range(n):
        indptr[r + 1] += indptr[r]
    cols = np.empty(indptr[n], dtype=np.int32)
    fill = indptr[:-1].copy()
    for i in range(src.size):
        u, v = src[i], dst[i]
        if drop_self_loops and u == v:
            continue
        cols[fill[u]] = v
        fill[u] += 1
        if symmetrize:
            cols[fill[v]] = u
            fill[v] += 1
    out = compact_rows(indptr, cols)
    return indptr, cols[:out].copy()


@njit(cache=True, nogil=True)
def compact_rows(indptr, cols):  # pragma: no cover - compiled
    """Sort each row of ``cols`` (rows ``indptr``), drop its duplicates and move it down over the room
    they left, in place; ``indptr`` becomes the compacted rows' offsets. Returns the entries kept."""
    n = indptr.size - 1
    out = 0
    start = indptr[0]
    for r in range(n):
        stop = indptr[r + 1]
        row = cols[start:stop]
        row.sort()
        first = out
        for k in range(row.size):
            if k == 0 or row[k] != row[k - 1]:
                cols[out] = row[k]
                out += 1
        indptr[r] = first
        start = stop
    indptr[n] = out
    return out


def csr_to_symmetric(indptr: np.ndarray, indices: np.ndarray, where: str = "topology") -> tuple[np.ndarray, np.ndarray]:
    """Rebuild a CSR symmetrized, sorted, deduplicated and without self loops.

    Only the row pointer and the id ranges must be valid; order, duplicates and
    missing reverse edges are what this repairs.
    """
    n = indptr.size - 1
    if n < 1 or indptr[0] != 0 or indptr[-1] != indices.size or (np.diff(indptr) < 0).any():
        raise DatasetError(f"{where}: indptr is not a valid row pointer for {indices.size} neighbour entries")
    if indices.size and (bad := np.flatnonzero((indices < 0) | (indices >= n))).size:
        node = int(np.searchsorted(indptr, bad[0], side="right") - 1)
        raise DatasetError(f"{where}: neighbour id {int(indices[bad[0]])} of node {node} is out of range [0, {n})")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    return edges_to_csr(rows, indices, n, symmetrize=True)
