"""The Edge sampler (GraphSAINT Algorithm 5, EDGE).

Edges are drawn independently, with replacement, with ``p(u, v)`` proportional
to ``1/deg(u) + 1/deg(v)``; the node set is their end points. The alias table
is over the CSR positions of the full graph (both directions of an undirected
edge carry the same probability, so this is the same law over undirected
edges), and ``edge_rows`` gives a position's row in O(1).

On a symmetric graph the same law needs no table: the weights' two terms
each sum to N' (the nodes with an edge), so a draw is an end point u uniform
among those nodes and then a uniform neighbour v of u. An undirected edge
{u, v} then comes with probability (1/deg(u) + 1/deg(v)) / N', the table's
(a self loop, one CSR position of weight 2/deg(u), with 1/deg(u) / N' both
ways). :func:`edge_select_by_ends` draws so: no O(E) table per sampler (12
bytes an edge, 3.2 GB at Kronecker scale 24, and twice that while building
it) and two dependent reads a draw instead of three or four.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.alias import DRAW_BLOCK, build_alias, draw_block
from saintpipe.services.sampler.kernels.dependent import alias_draw, slot_seed
from saintpipe.services.sampler.kernels.rng import bounded
from saintpipe.services.sampler.kernels.select import take

# Below this share of nodes with an edge, drawing an end point by rejection wastes too many draws: the
# sampler uses the alias table instead.
MIN_LINKED_SHARE = 0.25


@njit(cache=True, nogil=True, inline="always")
def position_weight(indptr, inv_v, u):
    """The unnormalized probability of a CSR position (row v, column u): ``1/deg(v) + 1/deg(u)``."""
    deg_u = indptr[u + 1] - indptr[u]
    # deg_u >= 1 on a symmetric graph; guard directed inputs anyway.
    return inv_v + (1.0 / deg_u if deg_u > 0 else 0.0)


@njit(cache=True, nogil=True)
def edge_weights_and_rows(indptr, indices, weights, rows):
    """``weights[k] = 1/deg(row) + 1/deg(col)`` and ``rows[k] = row`` for every CSR position ``k``."""
    num_nodes = indptr.size - 1
    for v in range(num_nodes):
        start = indptr[v]
        stop = indptr[v + 1]
        inv_v = 1.0 / (stop - start) if stop > start else 0.0
        for k in range(start, stop):
            weights[k] = position_weight(indptr, inv_v, indices[k])
            rows[k] = v


def build_edge_table(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The alias table (thresholds, aliases) and the row of every CSR position; built once per graph."""
    num_edges = indices.size
    weights = np.empty(num_edges, dtype=np.float64)
    rows = np.empty(num_edges, dtype=np.int32)
    edge_weights_and_rows(indptr, indices, weights, rows)
    thresh = np.empty(num_edges, dtype=np.uint32)
    alias = np.empty(num_edges, dtype=np.int32 if num_edges < 2**31 else np.int64)
    build_alias(weights, thresh, alias)
    return thresh, alias, rows


@njit(cache=True, nogil=True)
def edge_select(indices, edge_rows, thresh, alias, budget, state, bits, sel):
    """Draw ``budget`` edges and add both end points to the sampled set; returns the set size.

    Drawn in blocks, as :func:`~saintpipe.services.sampler.kernels.node.node_select`: the end points of a
    block are read before any is added, so their cache misses overlap too. The same set, in the same order.
    """
    columns = np.empty(DRAW_BLOCK, dtype=np.int64)
    coins = np.empty(DRAW_BLOCK, dtype=np.uint32)
    drawn = np.empty(DRAW_BLOCK, dtype=np.int64)
    ends = np.empty((DRAW_BLOCK, 2), dtype=np.int64)
    count = 0
    for start in range(0, budget, DRAW_BLOCK):
        m = min(DRAW_BLOCK, budget - start)
        draw_block(state, thresh, alias, columns, coins, drawn, m)
        for j in range(m):
            k = drawn[j]
            ends[j, 0] = edge_rows[k]
            ends[j, 1] = indices[k]
        for j in range(m):
            count = take(ends[j, 0], bits, sel, count)
            count = take(ends[j, 1], bits, sel, count)
    return count


@njit(cache=True, nogil=True)
def edge_select_by_ends(indptr, indices, budget, state, bits, sel):
    """:func:`edge_select`'s law on a symmetric graph, without a table (the module docstring): ``budget``
    edges, each a uniform node with an edge and a uniform neighbour of it; returns the set size.

    Drawn in blocks: the candidate end points' rows, then the chosen neighbours, are read a block at a time
    so that their cache misses overlap. Candidates without an edge are rejected (a block can take fewer
    than its size); the draws past ``budget`` in the last block are discarded.
    """
    n = indptr.size - 1
    cand = np.empty(DRAW_BLOCK, dtype=np.int64)
    start = np.empty(DRAW_BLOCK, dtype=np.int64)
    deg = np.empty(DRAW_BLOCK, dtype=np.int64)
    ends = np.empty((DRAW_BLOCK, 2), dtype=np.int64)
    count = 0
    drawn = 0
    while drawn < budget:
        for j in range(DRAW_BLOCK):
            cand[j] = bounded(state, n)
        for j in range(DRAW_BLOCK):
            u = cand[j]
            start[j] = indptr[u]
            deg[j] = indptr[u + 1] - start[j]
        m = 0
        for j in range(DRAW_BLOCK):
            if deg[j] > 0 and drawn + m < budget:
                ends[m, 0] = cand[j]
                ends[m, 1] = start[j] + bounded(state, deg[j])
                m += 1
        for j in range(m):
            ends[j, 1] = indices[ends[j, 1]]
        for j in range(m):
            count = take(ends[j, 0], bits, sel, count)
            count = take(ends[j, 1], bits, sel, count)
        drawn += m
    return count


@njit(cache=True, nogil=True)
def edge_select_dependent(indices, edge_rows, thresh, alias, budget, chain, step, kappa, bits, sel):
    """:func:`edge_select` with dependent variates (``kernels.dependent``): draw ``j`` is slot ``j``."""
    c, t, kap = np.uint64(chain), np.uint64(step), np.uint64(kappa)
    count = 0
    for j in range(budget):
        k, _ = alias_draw(slot_seed(c, np.uint64(j), t, kap), thresh, alias)
        count = take(edge_rows[k], bits, sel, count)
        count = take(indices[k], bits, sel, count)
    return count
