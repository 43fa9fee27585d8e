"""The unbiased random-walk sampler (GraphSAINT Algorithm 5, RW).

``r`` roots drawn uniformly (with replacement, as GraphSAINT's implementation
does), each walking ``h`` steps to a uniformly chosen neighbour. A walk that
reaches a node without neighbours stops there. The walks are written out as
paths first (``paths[i, j]`` is the j-th node of walk i, ``-1`` after a stop)
so that tests can check every step is an edge; the node set is their union.

Both loops are latency-bound on small graphs (cora: 9000 steps in tens of
microseconds), so the random stream's state lives in registers for the whole
walk (see :func:`saintpipe.services.sampler.kernels.rng.step`), the union is taken
without a data-dependent branch, and arrays are indexed with uint64, which
spares Numba's negative-index wraparound on every access.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels import dependent
from saintpipe.services.sampler.kernels.rng import bounded_local, load, store
from saintpipe.services.sampler.kernels.select import take

_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)


@njit(cache=True, nogil=True)
def random_walks(indptr, indices, state, paths):
    """Fill ``paths`` (int32 [r, h + 1]) with r walks of h steps from uniform roots."""
    num_nodes = indptr.size - 1
    length = paths.shape[1]
    s0, s1, s2, s3 = load(state)
    for i in range(paths.shape[0]):
        root, s0, s1, s2, s3 = bounded_local(s0, s1, s2, s3, num_nodes)
        u = np.uint64(root)
        paths[i, 0] = u
        j = 1
        while j < length:
            start = np.uint64(indptr[u])
            stop = np.uint64(indptr[u + _ONE])
            if stop == start:
                break
            b, s0, s1, s2, s3 = bounded_local(s0, s1, s2, s3, stop - start)
            u = np.uint64(indices[start + np.uint64(b)])
            paths[i, j] = u
            j += 1
        while j < length:
            paths[i, j] = -1
            j += 1
    store(state, s0, s1, s2, s3)


@njit(cache=True, nogil=True)
def random_walk_select(indptr, indices, state, paths, bits, sel):
    """Walk and return the number of distinct visited nodes written to ``sel``.

    The union is branchless (a walk revisits nodes unpredictably): each
    visited node is written at ``sel[count]`` and the count advances only if
    the node was new. That write needs a spare slot, so the last slot of
    ``sel`` is filled by :func:`~saintpipe.services.sampler.kernels.select.take`.
    """
    random_walks(indptr, indices, state, paths)
    return union_paths(paths, bits, sel)


@njit(cache=True, nogil=True, inline="always")
def union_paths(paths, bits, sel):
    """Add every node of ``paths`` to the sampled set; returns the set size (see :func:`random_walk_select`)."""
    count = 0
    spare = sel.size - 1
    for i in range(paths.shape[0]):
        for j in range(paths.shape[1]):
            v = paths[i, j]
            if v < 0:
                break
            if count < spare:
                uv = np.uint64(v)
                w = uv >> _SIX
                shift = uv & _LOW6
                word = bits[w]
                sel[np.uint64(count)] = v
                count += np.int64(((word >> shift) & _ONE) ^ _ONE)
                bits[w] = word | (_ONE << shift)
            else:
                count = take(v, bits, sel, count)
    return count


@njit(cache=True, nogil=True)
def random_walks_dependent(indptr, indices, chain, step, kappa, paths):
    """:func:`random_walks` with dependent variates (``kernels.dependent``): walk ``i`` is slot ``i``.

    A walk's root and every step come from its slot's stream, so a walk whose
    slot did not switch is the same walk as at the previous step of the chain.
    """
    num_nodes = indptr.size - 1
    length = paths.shape[1]
    c, t, k = np.uint64(chain), np.uint64(step), np.uint64(kappa)
    for i in range(paths.shape[0]):
        x = dependent.slot_seed(c, np.uint64(i), t, k)
        root, x = dependent.bounded(x, num_nodes)
        u = np.uint64(root)
        paths[i, 0] = u
        j = 1
        while j < length:
            start = np.uint64(indptr[u])
            stop = np.uint64(indptr[u + _ONE])
            if stop == start:
                break
            b, x = dependent.bounded(x, stop - start)
            u = np.uint64(indices[start + np.uint64(b)])
            paths[i, j] = u
            j += 1
        while j < length:
            paths[i, j] = -1
            j += 1


@njit(cache=True, nogil=True)
def random_walk_select_dependent(indptr, indices, chain, step, kappa, paths, bits, sel):
    """:func:`random_walk_select` with dependent variates."""
    random_walks_dependent(indptr, indices, chain, step, kappa, paths)
    return union_paths(paths, bits, sel)
