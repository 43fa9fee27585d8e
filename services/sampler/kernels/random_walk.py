"""The unbiased random-walk sampler (GraphSAINT Algorithm 5, RW).

``r`` roots drawn uniformly (with replacement, as GraphSAINT's implementation
does), each walking ``h`` steps to a uniformly chosen neighbour. A walk that
reaches a node without neighbours stops there. The walks are written out as
paths first (``paths[i, j]`` is the j-th node of walk i, ``-1`` after a stop)
so that tests can check every step is an edge; the node set is their union.
"""

from __future__ import annotations

from numba import njit

from services.sampler.kernels.rng import bounded
from services.sampler.kernels.select import take


@njit(cache=True)
def random_walks(indptr, indices, state, paths):
    """Fill ``paths`` (int32 [r, h + 1]) with r walks of h steps from uniform roots."""
    num_nodes = indptr.size - 1
    length = paths.shape[1]
    for i in range(paths.shape[0]):
        u = bounded(state, num_nodes)
        paths[i, 0] = u
        j = 1
        while j < length:
            start = indptr[u]
            deg = indptr[u + 1] - start
            if deg == 0:
                break
            u = indices[start + bounded(state, deg)]
            paths[i, j] = u
            j += 1
        while j < length:
            paths[i, j] = -1
            j += 1


@njit(cache=True)
def random_walk_select(indptr, indices, state, paths, g2l, sel):
    """Walk and return the number of distinct visited nodes written to ``sel``."""
    random_walks(indptr, indices, state, paths)
    count = 0
    for i in range(paths.shape[0]):
        for j in range(paths.shape[1]):
            v = paths[i, j]
            if v < 0:
                break
            count = take(v, g2l, sel, count)
    return count
