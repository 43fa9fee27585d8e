"""Numba kernels for layer-wise evaluation: k-hop neighbourhoods and induced CSR blocks.

Pure functions over arrays. ``scratch`` arrays (int32 [N], all -1 between
calls) are passed in so a whole evaluation pass allocates them once.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def k_hop_nodes(
    indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray, hops: int, scratch: np.ndarray
) -> np.ndarray:
    """Sorted ids of ``seeds`` and every node within ``hops`` hops of them.

    ``scratch`` (int32 [N], all -1) is used as a visited mark and restored before returning.
    """
    found = np.empty(seeds.size, dtype=np.int64)
    count = 0
    for s in seeds:
        if scratch[s] < 0:
            scratch[s] = 1
            found[count] = s
            count += 1
    begin = 0
    for _ in range(hops):
        end = count
        for i in range(begin, end):
            v = found[i]
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                if scratch[u] < 0:
                    scratch[u] = 1
                    if count == found.size:
                        grown = np.empty(found.size * 2 + 1, dtype=np.int64)
                        grown[:count] = found[:count]
                        found = grown
                    found[count] = u
                    count += 1
        begin = end
    out = np.sort(found[:count])
    for v in out:
        scratch[v] = -1
    return out


@njit(cache=True)
def induce(
    indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray, scratch: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the subgraph induced on sorted ``nodes`` (local ids, rows sorted).

    ``scratch`` (int32 [N], all -1) maps global to local ids during the call and is restored.
    """
    n = nodes.size
    for i in range(n):
        scratch[nodes[i]] = i
    sub_indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        v = nodes[i]
        c = 0
        for j in range(indptr[v], indptr[v + 1]):
            if scratch[indices[j]] >= 0:
                c += 1
        sub_indptr[i + 1] = sub_indptr[i] + c
    sub_indices = np.empty(sub_indptr[n], dtype=np.int32)
    for i in range(n):
        v = nodes[i]
        k = sub_indptr[i]
        for j in range(indptr[v], indptr[v + 1]):
            local = scratch[indices[j]]
            if local >= 0:
                sub_indices[k] = local
                k += 1
    for i in range(n):
        scratch[nodes[i]] = -1
    return sub_indptr, sub_indices
