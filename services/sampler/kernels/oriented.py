"""Induction by degree-ordered orientation: each edge is read once, from its lower-ranked end.

The plain induction (:func:`~saintpipe.services.sampler.kernels.induce.induce_scan`)
reads every neighbour of every sampled node. The samplers reach nodes in
proportion to their degree, so on a skewed graph that scan is mostly hub
rows, and it grows with the graph's degree tail even at a fixed mean degree
(docs/benchmarks/kernels.md).

Rank the nodes by ``(degree, id)`` and keep, for each node ``v``, only its
neighbours of higher rank (and ``v`` itself, for a self-loop): the
*orientation*, half the graph's entries. An edge ``{v, w}`` of the induced
subgraph is found exactly once, in the list of its lower-ranked end, and
both of its entries are written from there. A hub's list holds only the
few neighbours that outrank it, so the entries read per subgraph fall
several-fold on skewed graphs. This is the ordering trick of triangle
counting (Chiba and Nishizeki; Schank and Wagner), applied to the induction.

For the aggregator coefficients and the normalization counts every entry
needs its full-graph CSR position; the orientation stores both positions of
each edge (``forward``: ``(v, w)`` in row ``v``; ``reverse``: ``(w, v)`` in
row ``w``), so nothing is searched per subgraph. Built once per graph by two
passes over the CSR (:func:`orient_graph`); the result is identical, bit for
bit, to the plain scan's (rows sorted, the same positions).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.prefetch import prefetch
from saintpipe.services.sampler.kernels.select import local_id

_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)
# Prefetch distances, in nodes: the pass that sizes the output asks for indptr entries this far ahead, the scan
# for the first two lines of a list half as far (the best measured on Kronecker scale 24; longer gained nothing).
INDPTR_AHEAD = np.uint64(32)
LIST_AHEAD = np.uint64(16)
_LINE = np.uint64(16)  # int32 entries per 64-byte cache line


class Orientation(NamedTuple):
    """The oriented graph: node ``v``'s higher-ranked neighbours are ``columns[indptr[v]:indptr[v + 1]]``
    (ascending), with the CSR positions of ``(v, w)`` in ``forward`` and of ``(w, v)`` in ``reverse``."""

    indptr: np.ndarray  # int64 [N + 1]
    columns: np.ndarray  # int32 [m]
    forward: np.ndarray  # int32 or int64 [m] (int64 when the graph has 2**31 entries or more)
    reverse: np.ndarray  # the same dtype

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self)


EMPTY = Orientation(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))


@njit(cache=True, nogil=True, inline="always")
def _outranks(w, v, degree):
    """Whether node ``w`` ranks above node ``v``: higher degree, ties broken by the larger id."""
    dw = degree[w]
    dv = degree[v]
    return dw > dv or (dw == dv and w > v)


@njit(cache=True, nogil=True)
def _count(indptr, indices, degree, out_indptr):
    """``out_indptr``: the prefix sums of every node's oriented list length (self-loops included)."""
    n = indptr.size - 1
    out_indptr[0] = 0
    for v in range(n):
        kept = 0
        for q in range(indptr[v], indptr[v + 1]):
            w = indices[q]
            kept += w == v or _outranks(w, v, degree)
        out_indptr[v + 1] = out_indptr[v] + kept


@njit(cache=True, nogil=True)
def _fill(indptr, indices, degree, out_indptr, columns, forward, reverse, forward_next, reverse_slot):
    """Fill the lists in one pass over the rows in ascending order; returns -1, or a node whose edges do not
    match up (a graph that is not symmetric).

    Row ``x`` appends its higher-ranked neighbours to its own list (ascending,
    as the row is). The reverse positions of node ``y``'s list are met while
    passing the rows of ``y``'s neighbours, in ascending order too, so the
    k-th met is its k-th entry's. Symmetry is checked on the way, without a
    pass of its own: a reverse entry met in row ``x`` must sit in the slot
    whose column is ``x`` (checked at once if ``y``'s list is filled, else
    noted in the slot and checked when it is), and every list must get as
    many reverse entries as it has slots.
    """
    n = indptr.size - 1
    for x in range(n):
        for q in range(indptr[x], indptr[x + 1]):
            y = indices[q]
            if y == x or _outranks(y, x, degree):
                k = forward_next[x]
                slot = out_indptr[x] + k
                forward_next[x] = k + 1
                if slot < reverse_slot[x] and columns[slot] != y:
                    return x  # the reverse entry met for this slot came from another row
                columns[slot] = y
                forward[slot] = q
            if y == x or _outranks(x, y, degree):
                slot = reverse_slot[y]  # one random read per entry: the absolute slot, not a count and a base
                if slot >= out_indptr[y + 1]:
                    return y
                reverse_slot[y] = slot + 1
                reverse[slot] = q
                if y <= x:  # y's list is filled (or this is the self-loop just written): check now
                    if columns[slot] != x:
                        return y
                else:
                    columns[slot] = x  # checked when row y fills this slot
    for v in range(n):
        if reverse_slot[v] != out_indptr[v + 1]:
            return v
    return -1


def orient_graph(indptr: np.ndarray, indices: np.ndarray,
                 allocate: Callable[[str, int, type], np.ndarray] | None = None) -> Orientation | None:
    """The degree-ordered orientation of an undirected CSR graph (sorted rows, both directions stored).

    Two passes over the edges, O(E); memory: 4 bytes per oriented entry for
    the columns and 8 (4 below 2**31 graph entries) for each of the two
    position arrays, i.e. 12 to 20 bytes per undirected edge.

    ``allocate(name, size, dtype)``, when given, makes the four result arrays
    (named as the fields of :class:`Orientation`), for example memory-mapped
    files that the lists are written into directly; ``np.empty`` otherwise.

    Returns None when the graph is not symmetric (an edge whose reverse is
    missing): induction then scans, and reports the asymmetry as it always did.
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices)
    n = indptr.size - 1
    if allocate is None:
        def allocate(name: str, size: int, dtype: type) -> np.ndarray:
            return np.empty(size, dtype=dtype)
    degree = np.diff(indptr).astype(np.int32)  # rows hold distinct ids: a degree is below N < 2**31
    out_indptr = allocate("indptr", n + 1, np.int64)
    _count(indptr, indices, degree, out_indptr)
    m = int(out_indptr[-1])
    position = np.int32 if indices.size < 2**31 else np.int64
    columns = allocate("columns", m, np.int32)
    forward = allocate("forward", m, position)
    reverse = allocate("reverse", m, position)
    forward_next = np.zeros(n, dtype=np.int32)
    reverse_slot = np.array(out_indptr[:-1])
    if _fill(indptr, indices, degree, out_indptr, columns, forward, reverse, forward_next, reverse_slot) >= 0:
        return None
    return Orientation(out_indptr, columns, forward, reverse)


@njit(cache=True, nogil=True, inline="always")
def _prefetch_list(oindptr, ocolumns, oforward, oreverse, w, want_eids):
    """Ask for the first two lines of node ``w``'s oriented list (and of its positions, with ``want_eids``)."""
    start = np.uint64(oindptr[w])
    prefetch(ocolumns, start)
    long_list = np.uint64(oindptr[w + _ONE]) > start + _LINE
    if long_list:
        prefetch(ocolumns, start + _LINE)
    if want_eids:
        prefetch(oforward, start)
        prefetch(oreverse, start)
        if long_list:
            prefetch(oforward, start + _LINE)
            prefetch(oreverse, start + _LINE)


@njit(cache=True, nogil=True)
def induce_oriented(oindptr, ocolumns, oforward, oreverse, bits, ranks, node_ids, want_eids):
    """:func:`~saintpipe.services.sampler.kernels.induce.induce_scan` through the orientation: the same
    ``(sub_indptr int64 [n+1], kept int32, tmp_eid int64)``, bit for bit, except that ``kept`` holds
    local ids (the subgraph's columns) instead of global ones.

    ``bits`` must hold exactly the membership bits of ``node_ids`` (sorted),
    and ``ranks`` their words' ranks (``select.index_ranks``); both are left
    as they are.

    Each oriented list is scanned branchlessly against the bitset, as the plain
    scan does, collecting the subgraph's edges once each (those of node ``i``
    end at ``found_end[i]``), then rows are counted (both ends of each edge) and
    each row merges its two sorted runs (below), so every row comes out sorted,
    as in the full graph. Indices are unsigned, as in the plain scan (no
    negative-index wraparound in the loops).
    """
    n = np.uint64(node_ids.size)
    bound = np.int64(0)
    for i in range(n):  # the first read of each indptr entry: a miss on a large graph, so asked for ahead
        if i + INDPTR_AHEAD < n:
            prefetch(oindptr, node_ids[i + INDPTR_AHEAD])
        v = np.uint64(node_ids[i])
        bound += oindptr[v + _ONE] - oindptr[v]
    edge_col = np.empty(bound, dtype=np.int32)  # the other end: global id, then local
    # The positions are copied along the scan, which reads the lists in order (streamed by the prefetcher);
    # looked up afterwards, the kept ones alone cost a cache miss or two per list.
    edge_fwd = np.empty(bound if want_eids else 0, dtype=oforward.dtype)
    edge_rev = np.empty(bound if want_eids else 0, dtype=oreverse.dtype)
    found_end = np.empty(n, dtype=np.uint64)
    found = np.uint64(0)
    for i in range(n):
        if i + LIST_AHEAD < n:
            _prefetch_list(oindptr, ocolumns, oforward, oreverse, np.uint64(node_ids[i + LIST_AHEAD]), want_eids)
        v = np.uint64(node_ids[i])
        if want_eids:
            for s in range(np.uint64(oindptr[v]), np.uint64(oindptr[v + _ONE])):
                u = np.uint64(ocolumns[s])
                edge_col[found] = u
                edge_fwd[found] = oforward[s]
                edge_rev[found] = oreverse[s]
                found += (bits[u >> _SIX] >> (u & _LOW6)) & _ONE
        else:
            for s in range(np.uint64(oindptr[v]), np.uint64(oindptr[v + _ONE])):
                u = np.uint64(ocolumns[s])
                edge_col[found] = u
                found += (bits[u >> _SIX] >> (u & _LOW6)) & _ONE
        found_end[i] = found

    # Row r's entries are two ascending runs: its own edges (the oriented list's order), and the edges whose
    # lower-ranked end is another node, met in the order of those nodes. The second run goes into a buffer
    # (sized by a count), then each row merges the two, writing its part of the output in order.
    sub_indptr = np.zeros(n + _ONE, dtype=np.int64)
    mirrored = np.zeros(n + _ONE, dtype=np.int64)
    k = np.uint64(0)
    for i in range(n):
        end = found_end[i]
        sub_indptr[i + _ONE] += np.int64(end - k)
        while k < end:
            j = np.uint64(local_id(bits, ranks, edge_col[k]))
            edge_col[k] = j
            if j != i:  # a self-loop is one entry, in its own run
                sub_indptr[j + _ONE] += 1
                mirrored[j + _ONE] += 1
            k += _ONE
    for i in range(n):
        sub_indptr[i + _ONE] += sub_indptr[i]
        mirrored[i + _ONE] += mirrored[i]
    e = np.uint64(sub_indptr[n])

    other_col = np.empty(np.uint64(mirrored[n]), dtype=np.int32)
    other_eid = np.empty(np.uint64(mirrored[n]) if want_eids else np.uint64(0), dtype=np.int64)
    cursor = np.empty(n, dtype=np.uint64)
    for i in range(n):
        cursor[i] = mirrored[i]
    k = np.uint64(0)
    for i in range(n):
        end = found_end[i]
        while k < end:
            j = np.uint64(edge_col[k])
            if j != i:
                p = cursor[j]
                cursor[j] = p + _ONE
                other_col[p] = i
                if want_eids:
                    other_eid[p] = edge_rev[k]  # the entry (j, i) sits at (w, v)'s position
            k += _ONE

    kept = np.empty(e, dtype=np.int32)
    tmp_eid = np.empty(e if want_eids else np.uint64(0), dtype=np.int64)
    own = np.uint64(0)
    for r in range(n):
        own_end = found_end[r]
        a = np.uint64(mirrored[r])
        a_end = np.uint64(mirrored[r + _ONE])
        q = np.uint64(sub_indptr[r])
        while own < own_end or a < a_end:
            if a >= a_end or (own < own_end and edge_col[own] < other_col[a]):
                kept[q] = edge_col[own]
                if want_eids:
                    tmp_eid[q] = edge_fwd[own]
                own += _ONE
            else:
                kept[q] = other_col[a]
                if want_eids:
                    tmp_eid[q] = other_eid[a]
                a += _ONE
            q += _ONE
    return sub_indptr, kept, tmp_eid
