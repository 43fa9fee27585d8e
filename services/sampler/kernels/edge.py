"""The Edge sampler (GraphSAINT Algorithm 5, EDGE).

Edges are drawn independently, with replacement, with ``p(u, v)`` proportional
to ``1/deg(u) + 1/deg(v)``; the node set is their end points. The alias table
is over the CSR positions of the full graph (both directions of an undirected
edge carry the same probability, so this is the same law over undirected
edges), and ``edge_rows`` gives a position's row in O(1).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.alias import DRAW_BLOCK, build_alias, draw_block
from saintpipe.services.sampler.kernels.dependent import alias_draw, slot_seed
from saintpipe.services.sampler.kernels.select import take


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
def edge_select_dependent(indices, edge_rows, thresh, alias, budget, chain, step, kappa, bits, sel):
    """:func:`edge_select` with dependent variates (``kernels.dependent``): draw ``j`` is slot ``j``."""
    c, t, kap = np.uint64(chain), np.uint64(step), np.uint64(kappa)
    count = 0
    for j in range(budget):
        k, _ = alias_draw(slot_seed(c, np.uint64(j), t, kap), thresh, alias)
        count = take(edge_rows[k], bits, sel, count)
        count = take(indices[k], bits, sel, count)
    return count
