"""The Node sampler of GraphSAINT: ``budget`` draws with replacement, node set = the distinct draws.

GraphSAINT's node sampler draws ``v`` with probability proportional to
``||A[:, v]||^2``; on the unweighted adjacency that is ``deg(v)``, which is
what its reference implementation uses. Isolated nodes are never drawn; on a
graph with no edge at all every node gets the same weight.

``uniform_mix`` (beta) draws from the defensive mixture ``(1 - beta) * deg(v) /
sum(deg) + beta / N`` instead (Hesterberg's defensive importance sampling):
the degree-proportional law gives the nodes of a small component a tiny
per-draw probability (a degree-1 pair on Cora is in a 1,500-draw subgraph with
probability 0.13), and the normalization that keeps the estimator unbiased
weighs them by its inverse, so the rare subgraph holding one is a loss spike.
The mixture bounds every node's probability from below by
``1 - (1 - beta / N)^budget``; the closed-form inclusion probabilities
(``inclusion.py``) use the same law, so the normalization stays exact.

On a symmetric graph with an edge the law needs no table
(:func:`node_select_by_columns`): the column of a uniform CSR position is
``v`` with probability ``deg(v) / sum(deg)`` (v's column appears deg(v)
times), so a draw is, with probability beta, a uniform node, else the column
of a uniform position: one random read, and no per-sampler table (8 bytes a
node, 134 MB at Kronecker scale 24).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.alias import DRAW_BLOCK, build_alias, draw_block
from saintpipe.services.sampler.kernels.dependent import alias_draw, slot_seed
from saintpipe.services.sampler.kernels.rng import bounded, uniform
from saintpipe.services.sampler.kernels.select import take


def node_draw_probabilities(indptr: np.ndarray, uniform_mix: float = 0.0) -> np.ndarray:
    """float64 [N]: the probability that one draw is ``v``, ``(1 - beta) deg(v) / sum(deg) + beta / N``.

    Uniform on a graph without edges. The node sampler's alias table and its
    closed-form inclusion probabilities both read this one law.
    """
    deg = np.diff(indptr).astype(np.float64)
    num_nodes = deg.size
    total = deg.sum()
    if total <= 0:
        return np.full(num_nodes, 1.0 / num_nodes)
    return (1.0 - uniform_mix) * (deg / total) + uniform_mix / num_nodes


def build_node_table(indptr: np.ndarray, uniform_mix: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The alias table of :func:`node_draw_probabilities`."""
    weights = node_draw_probabilities(indptr, uniform_mix)
    thresh = np.empty(weights.size, dtype=np.uint32)
    alias = np.empty(weights.size, dtype=np.int32)
    build_alias(weights, thresh, alias)
    return thresh, alias


@njit(cache=True, nogil=True)
def node_select(thresh, alias, budget, state, bits, sel):
    """Draw ``budget`` nodes and return the number of distinct ones written to ``sel``.

    Drawn in blocks (:func:`~saintpipe.services.sampler.kernels.alias.draw_block`): the same nodes in the
    same order as one draw at a time, with the table's cache misses overlapped.
    """
    columns = np.empty(DRAW_BLOCK, dtype=np.int64)
    coins = np.empty(DRAW_BLOCK, dtype=np.uint32)
    drawn = np.empty(DRAW_BLOCK, dtype=np.int64)
    count = 0
    for start in range(0, budget, DRAW_BLOCK):
        m = min(DRAW_BLOCK, budget - start)
        draw_block(state, thresh, alias, columns, coins, drawn, m)
        for j in range(m):
            count = take(drawn[j], bits, sel, count)
    return count


@njit(cache=True, nogil=True)
def node_select_by_columns(indices, num_nodes, uniform_mix, budget, state, bits, sel):
    """:func:`node_select`'s law on a symmetric graph with an edge, without a table (the module docstring);
    returns the number of distinct nodes written to ``sel``.

    Drawn in blocks: the random numbers first, then the columns' reads, so that their cache misses overlap.
    """
    picks = np.empty(DRAW_BLOCK, dtype=np.int64)
    by_column = np.empty(DRAW_BLOCK, dtype=np.bool_)
    e = indices.size
    count = 0
    for start in range(0, budget, DRAW_BLOCK):
        m = min(DRAW_BLOCK, budget - start)
        for j in range(m):
            by_column[j] = not uniform(state) < uniform_mix
            picks[j] = bounded(state, e) if by_column[j] else bounded(state, num_nodes)
        for j in range(m):
            if by_column[j]:
                picks[j] = indices[picks[j]]
        for j in range(m):
            count = take(picks[j], bits, sel, count)
    return count


@njit(cache=True, nogil=True)
def node_select_dependent(thresh, alias, budget, chain, step, kappa, bits, sel):
    """:func:`node_select` with dependent variates (``kernels.dependent``): draw ``j`` is slot ``j``."""
    c, t, k = np.uint64(chain), np.uint64(step), np.uint64(kappa)
    count = 0
    for j in range(budget):
        v, _ = alias_draw(slot_seed(c, np.uint64(j), t, k), thresh, alias)
        count = take(v, bits, sel, count)
    return count
