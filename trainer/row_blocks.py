"""Row blocks of the full graph for layer-wise inference, and where to cut them (Numba kernels).

Pure functions over arrays. A row block is rows [start, stop) of the graph's CSR as a rectangular matrix over
its *sources*: the block's own nodes first (local ids 0..n-1), then every other neighbour once. A layer's
output rows for the block need only the previous layer's rows of those sources, so no k-hop neighbourhood is
ever induced (on a power-law graph a few hops reach most of the graph, which is why the k-hop form never
finished there, issue 23).

``scratch`` arrays (int32 [N], all -1 between calls) are passed in so a whole
inference pass allocates them once.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def row_block(
    indptr: np.ndarray, indices: np.ndarray, start: int, stop: int, scratch: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``[start, stop)`` as a CSR block over their sources.

    Returns:
        ``(sources, block_indptr, block_indices)``: int64 [m] global ids with ``sources[:n] == start..stop-1``;
        int64 [n+1] row pointers; int32 [e] local column ids into ``sources``, sorted within each row.
        ``scratch`` maps global to local ids during the call and is restored.
    """
    n = stop - start
    first = indptr[start]
    entries = indptr[stop] - first
    sources = np.empty(n + entries, dtype=np.int64)
    for i in range(n):
        sources[i] = start + i
        scratch[start + i] = i
    m = n
    block_indptr = np.empty(n + 1, dtype=np.int64)
    block_indptr[0] = 0
    block_indices = np.empty(entries, dtype=np.int32)
    for i in range(n):
        lo = indptr[start + i]
        hi = indptr[start + i + 1]
        for j in range(lo, hi):
            u = indices[j]
            local = scratch[u]
            if local < 0:
                local = m
                scratch[u] = m
                sources[m] = u
                m += 1
            block_indices[j - first] = local
        block_indices[lo - first : hi - first].sort()
        block_indptr[i + 1] = hi - first
    for k in range(m):
        scratch[sources[k]] = -1
    return sources[:m].copy(), block_indptr, block_indices


@njit(cache=True)
def block_bounds(indptr: np.ndarray, max_rows: int, max_units: int) -> np.ndarray:
    """Cut points ``[0, b1, ..., N]`` of consecutive row blocks, each at most ``max_rows`` rows and at most
    ``max_units`` rows + stored entries (its sources are no more than that). A row over the budget alone is a
    block of its own."""
    n = indptr.size - 1
    out = np.empty(n + 1, dtype=np.int64)
    out[0] = 0
    k = 0
    start = 0
    for v in range(n):
        rows = v - start + 1
        units = rows + indptr[v + 1] - indptr[start]
        if v > start and (rows > max_rows or units > max_units):
            k += 1
            out[k] = v
            start = v
    k += 1
    out[k] = n
    return out[: k + 1].copy()


@njit(cache=True)
def hop_counts(indptr, indices, a, b, seen, stamp):
    """How many distinct nodes rows ``[a, b)`` reach within one hop (themselves included) and within two.

    ``seen`` (int32 [N]) marks a node visited for this call by ``stamp``, which must differ from every earlier
    call's, so nothing is cleared between blocks. O(the entries of the one-hop set's rows): a scale-24 block's
    two-hop neighbourhood reads hundreds of millions of entries, too many to gather and sort.
    """
    first = np.empty(b - a + indptr[b] - indptr[a], dtype=np.int64)
    one = 0
    for v in range(a, b):
        seen[v] = stamp
        first[one] = v
        one += 1
    for q in range(indptr[a], indptr[b]):
        u = indices[q]
        if seen[u] != stamp:
            seen[u] = stamp
            first[one] = u
            one += 1
    two = one
    for i in range(one):
        v = first[i]
        for q in range(indptr[v], indptr[v + 1]):
            u = indices[q]
            if seen[u] != stamp:
                seen[u] = stamp
                two += 1
    return one, two
