"""Checking and preparing the full graph a sampler is configured with.

Kernels are compiled for one set of argument types. Every array a sampler
hands them is therefore made C-contiguous, given its canonical dtype (indptr
int64, indices int32) and viewed read-only, which is what memory-mapped
dataset files are anyway: one compiled specialization serves both.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.core.errors import InvalidArgument

_OK, _BAD_START, _DECREASING, _BAD_END, _OUT_OF_RANGE, _UNSORTED = range(6)


def readonly(array: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """A C-contiguous read-only view of ``array`` as ``dtype`` (copies only when it must)."""
    out = np.ascontiguousarray(array, dtype=dtype).view()
    out.flags.writeable = False
    return out


@njit(cache=True, nogil=True)
def _scan_csr(indptr, indices):
    """One pass over the CSR; returns (problem code, node, position)."""
    n = indptr.size - 1
    if indptr[0] != 0:
        return _BAD_START, 0, 0
    for v in range(n):
        start = indptr[v]
        stop = indptr[v + 1]
        if stop < start:
            return _DECREASING, v, start
        if stop > indices.size:
            return _BAD_END, v, stop
        prev = -1
        for k in range(start, stop):
            u = indices[k]
            if u < 0 or u >= n:
                return _OUT_OF_RANGE, v, k
            if u <= prev:
                return _UNSORTED, v, k
            prev = u
    if indptr[n] != indices.size:
        return _BAD_END, n, indptr[n]
    return _OK, 0, 0


def prepare_graph(indptr: np.ndarray, indices: np.ndarray, *,
                  check: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Validate a CSR graph and return (indptr int64, indices int32) as read-only contiguous arrays.

    Requires at least one node, ``indptr[0] == 0``, non-decreasing ``indptr``
    ending at ``len(indices)``, neighbour ids in ``[0, N)`` and every
    neighbour list strictly ascending (sorted, no duplicates). Symmetry is
    checked lazily: Algorithm 6 detects a directed edge inside a subgraph.

    Raises:
        InvalidArgument: naming the node and position at fault.
    """
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indices.ndim != 1:
        raise InvalidArgument(
            f"graph: indptr and indices must be 1-D, got shapes {indptr.shape} and {indices.shape}")
    if indptr.size < 2:
        raise InvalidArgument(
            f"graph: needs at least one node (indptr of length >= 2), got length {indptr.size}")
    if not (np.issubdtype(indptr.dtype, np.integer) and np.issubdtype(indices.dtype, np.integer)):
        raise InvalidArgument(
            f"graph: indptr and indices must be integer arrays, got {indptr.dtype} and {indices.dtype}")
    if indptr.size - 1 >= 2**31:
        raise InvalidArgument(f"graph: {indptr.size - 1} nodes do not fit int32 indices")
    if indices.dtype != np.int32 and indices.size and (indices.min() < 0 or indices.max() >= 2**31):
        raise InvalidArgument("graph: neighbour ids must fit int32")
    indptr = readonly(indptr, np.int64)
    indices = readonly(indices, np.int32)
    if check:
        code, node, pos = _scan_csr(indptr, indices)
        if code == _BAD_START:
            raise InvalidArgument(f"graph: indptr[0] must be 0, got {indptr[0]}")
        if code == _DECREASING:
            raise InvalidArgument(f"graph: indptr decreases at node {node}")
        if code == _BAD_END:
            raise InvalidArgument(f"graph: indptr[{node}] = {pos} but indices has {indices.size} entries")
        if code == _OUT_OF_RANGE:
            raise InvalidArgument(f"graph: neighbour id {indices[pos]} of node {node} (position {pos}) "
                                  f"is out of range [0, {indptr.size - 1})")
        if code == _UNSORTED:
            raise InvalidArgument(f"graph: neighbour list of node {node} is not strictly ascending at "
                                  f"position {pos} (sorted, duplicate-free lists are required)")
    return indptr, indices
