"""Inclusion probabilities of the samplers in closed form: GraphSAINT's ``p_v`` and ``alpha(u, v)`` without counting.

Every sampler builds a subgraph ``S`` from ``D`` independent draws (nodes, edges, walks, walkers). With
the per-draw probabilities ``a = P(u in draw)``, ``b = P(v in draw)`` and ``ab = P(u and v in the same
draw)``, inclusion-exclusion gives

    p_v  = 1 - (1 - b)^D
    p_uv = 1 - (1 - a)^D - (1 - b)^D + (1 - a - b + ab)^D

:func:`pair_probability` evaluates it in a form that does not cancel for small probabilities; the
samplers differ only in ``a``, ``b``, ``ab`` and ``D``, exactly for node and edge, as a prior for random
walk (:func:`walk_visits`) and frontier (:func:`_frontier_per_draw`) (docs/explanation/trainer.md,
"Closed forms", has each). ``alpha`` is stored at the CSR position of entry (row v, column u), as the
samplers read it, clamped into ``[ALPHA_FLOOR, 1]``; self loops and rows of nodes that can never be drawn
get 1. Clipping (``clip_multiple``) is left out of every formula, which overstates ``p_v`` and ``alpha``
by a relative ``(multiple - 1) / (2 |S|)`` (0.1 % for 16 and 8000-node subgraphs); ``clip_multiple=None``
makes the node and edge formulas exact.

Pure functions over the CSR; the row kernel is ``nogil`` and runs on row ranges in threads, and no
float64 array of the graph's edge count is made.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.config import (
    EXACT_KINDS,
    EdgeConfig,
    FrontierConfig,
    NodeConfig,
    RandomWalkConfig,
    SamplerConfigModel,
)
from saintpipe.services.sampler.graph import prepare_graph
from saintpipe.services.sampler.kernels.edge import position_weight
from saintpipe.services.sampler.kernels.node import node_draw_probabilities

__all__ = ["ALPHA_FLOOR", "EXACT_KINDS", "inclusion_probabilities", "is_exact", "pair_probability",
           "walk_visits"]

# alpha of a pair that can never be drawn together (p_uv = 0): any positive value is right, as the
# entry is never in a subgraph; this one keeps 1/(deg * alpha) finite in float32.
ALPHA_FLOOR = 1e-30
# Threads only pay off on graphs with many rows per thread.
_ROWS_PER_THREAD = 1 << 16


@njit(cache=True, nogil=True, inline="always")
def _pair(a, b, ab, hit_a, hit_b, miss_a, miss_b, log_miss_a, log_miss_b, draws):
    """:func:`pair_probability` given, for ``x`` = ``a`` and ``b``, ``hit = 1 - (1 - x)^D``, ``miss = (1 - x)^D``
    and ``log(miss)``, computed once per node: two transcendental calls per pair."""
    if a >= 1.0 or b >= 1.0:
        return min(hit_a, hit_b)  # one of them is in every subgraph
    # 1 - A - B + N with A = (1-a)^D, B = (1-b)^D, N = (1-a-b+ab)^D, written as
    # (1 - A)(1 - B) + (N - AB), N - AB = AB ((1 + c)^D - 1), c = (ab - a b) / ((1 - a)(1 - b)):
    # both terms keep their relative precision when a and b are tiny (the textbook form
    # cancels to 0 or below), and with ab = 0 the sum loses only a factor D / (D - 1).
    miss_both = miss_a * miss_b
    c = (ab - a * b) / ((1.0 - a) * (1.0 - b))
    if c <= -1.0:
        cov = -miss_both  # N = 0: u and v cannot both be missed
    else:
        t = draws * math.log1p(c)
        if t > 700.0:  # expm1 overflows where AB underflows: take N - AB directly
            cov = math.exp(log_miss_a + log_miss_b + t) - miss_both
        else:
            cov = miss_both * math.expm1(t)
    p = hit_a * hit_b + cov
    return min(max(p, 0.0), min(hit_a, hit_b))


@njit(cache=True, nogil=True, inline="always")
def _terms(x, draws):
    """``(hit, miss, log(miss))`` of a per-draw probability ``x`` over ``draws`` draws."""
    if x >= 1.0:
        return 1.0, 0.0, -np.inf
    log_miss = draws * math.log1p(-x) if x > 0.0 else 0.0
    return 0.0 - math.expm1(log_miss), math.exp(log_miss), log_miss  # 0.0 - : no -0.0 for x = 0


@njit(cache=True, nogil=True)
def pair_probability(a, b, ab, draws):
    """``P(u and v in S)`` over ``draws`` independent draws, ``a``/``b``/``ab`` per draw (module docstring).

    Evaluated without cancellation for small probabilities and clamped into
    ``[0, min(p_u, p_v)]``.

    Example:
        >>> round(pair_probability(0.1, 0.2, 0.0, 1), 12), round(pair_probability(0.5, 0.5, 0.5, 3), 6)
        (0.0, 0.875)
    """
    hit_a, miss_a, log_a = _terms(a, draws)
    hit_b, miss_b, log_b = _terms(b, draws)
    return _pair(a, b, ab, hit_a, hit_b, miss_a, miss_b, log_a, log_b, draws)


@njit(cache=True, nogil=True)
def _node_table(per_draw, draws):
    """float64 [N, 4]: per-draw probability, hit, miss, log(miss) of every node (one cache line per gather)."""
    table = np.empty((per_draw.size, 4), dtype=np.float64)
    for v in range(per_draw.size):
        table[v, 0] = per_draw[v]
        table[v, 1], table[v, 2], table[v, 3] = _terms(per_draw[v], draws)
    return table


@njit(cache=True, nogil=True)
def _alpha_rows(indptr, indices, table, pair_node, pair_const, pair_inv_deg, draws, row_start, row_stop, alpha):
    """``alpha`` on rows ``[row_start, row_stop)``: the shared pair formula, one row at a time.

    ``table`` is :func:`_node_table`'s. The joint per-draw probability of an
    entry (row v, column u) is ``min(a, b, pair_const + pair_node[v] +
    pair_node[u] + pair_inv_deg * (1/deg(v) + 1/deg(u)))`` (``pair_node``
    empty: no node term); each sampler sets the terms it needs.
    """
    with_node_term = pair_node.size > 0
    for v in range(row_start, row_stop):
        start = indptr[v]
        stop = indptr[v + 1]
        if stop == start:
            continue
        b, p_v, miss_b, log_b = table[v, 0], table[v, 1], table[v, 2], table[v, 3]
        inv_v = 1.0 / (stop - start)
        for k in range(start, stop):
            u = indices[k]
            if u == v or p_v <= 0.0:
                alpha[k] = 1.0  # a self loop is in S with v; a node never drawn: never read
                continue
            a = table[u, 0]
            joint = pair_const
            if with_node_term:
                joint += pair_node[v] + pair_node[u]
            if pair_inv_deg != 0.0:
                deg_u = indptr[u + 1] - indptr[u]
                joint += pair_inv_deg * (inv_v + (1.0 / deg_u if deg_u > 0 else 0.0))
            joint = min(joint, a, b)
            ratio = _pair(a, b, joint, table[u, 1], p_v, table[u, 2], miss_b, table[u, 3], log_b, draws) / p_v
            alpha[k] = min(1.0, max(ratio, ALPHA_FLOOR))


@njit(cache=True, nogil=True)
def _edge_per_draw(indptr, indices):
    """Per draw of the edge sampler: ``(Q float64 [N], sum(w))``, ``Q_v`` the sum of ``w_k = 1/deg(row) +
    1/deg(col)`` over positions with row v or column v, a self loop once (not yet divided by ``sum(w)``)."""
    num_nodes = indptr.size - 1
    q = np.zeros(num_nodes, dtype=np.float64)
    total = 0.0
    for v in range(num_nodes):
        start = indptr[v]
        stop = indptr[v + 1]
        inv_v = 1.0 / (stop - start) if stop > start else 0.0
        for k in range(start, stop):
            u = indices[k]
            w = position_weight(indptr, inv_v, u)  # the edge sampler's alias table's weight
            total += w
            q[v] += w
            if u != v:
                q[u] += w
    return q, total


@njit(cache=True, nogil=True)
def walk_visits(indptr, indices, steps):
    """Expected visits of one random walk from a uniform root: ``(visits, before_last)``, float64 [N] each.

    ``x_0 = 1/N`` and ``x_{t+1}[u] = sum over v with u in N(v) of x_t[v] / deg(v)``
    (mass on a node without neighbours stops, as the walk does); ``visits =
    sum_{t<=h} x_t`` and ``before_last = sum_{t<h} x_t``. ``h`` sparse pushes,
    O(h E) time and O(N) memory.
    """
    num_nodes = indptr.size - 1
    x = np.full(num_nodes, 1.0 / num_nodes)
    nxt = np.empty(num_nodes, dtype=np.float64)
    visits = x.copy()
    before_last = np.zeros(num_nodes, dtype=np.float64)
    for _ in range(steps):
        nxt[:] = 0.0
        for v in range(num_nodes):
            start = indptr[v]
            stop = indptr[v + 1]
            before_last[v] += x[v]
            if stop == start:
                continue
            share = x[v] / (stop - start)
            for k in range(start, stop):
                nxt[indices[k]] += share
        x, nxt = nxt, x
        for v in range(num_nodes):
            visits[v] += x[v]
    return visits, before_last


def _frontier_per_draw(indptr: np.ndarray, m: int, n: int) -> tuple[np.ndarray, float]:
    """The frontier prior: per-walker node probabilities and the per-walker joint term of an edge.

    What kernels/frontier.py draws: ``S`` = the initial frontier (``m``
    distinct uniform nodes) plus the ``n - m`` popped nodes, a pop taking a
    frontier node with probability proportional to its degree, which is then
    replaced by a uniform neighbour. In the m-dimensional walk's stationary
    regime (Ribeiro and Towsley) the popped edge is uniform over the edges,
    so a pop is a degree-proportional node. Modelled as ``m`` independent
    walkers, each contributing its start node (probability ``i0`` chosen so
    that ``1 - (1 - i0)^m = m / N``, the initial frontier's exact marginal) and
    ``L = (n - m) / m`` degree-proportional visits: ``b_v = min(1, i0 + L
    deg(v) / sum(deg))``; a walker traverses a given undirected edge about ``L
    * 2 / sum(deg)`` times. It ignores the start transient (early pops lean
    toward the uniform initial frontier), the coupling of the walkers through
    the shared pop budget, and pairs reached without a direct step; the counts
    correct all three.
    """
    num_nodes = indptr.size - 1
    deg = np.diff(indptr).astype(np.float64)
    total = float(deg.sum())
    i0 = 1.0 if m >= num_nodes else -math.expm1(math.log1p(-m / num_nodes) / m)
    visits = (n - m) / m
    if total <= 0:
        return np.full(num_nodes, i0), 0.0
    return np.minimum(1.0, i0 + visits * deg / total), 2.0 * visits / total


def is_exact(config: SamplerConfigModel) -> bool:
    """Whether :func:`inclusion_probabilities` is exact for this sampler (node and edge; up to clipping)."""
    return config.kind in EXACT_KINDS


def inclusion_probabilities(config: SamplerConfigModel, indptr: np.ndarray, indices: np.ndarray, *,
                            threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(p_node float64 [N], alpha float32 [E])`` of one subgraph of this sampler configuration.

    Exact for the node and edge samplers (:func:`is_exact`), a prior for the
    random walk and frontier samplers; clipping is ignored (module docstring).

    Args:
        config: the sampler configuration.
        indptr, indices: the full graph (symmetric CSR, sorted rows), validated first (one O(E) pass).
        threads: threads for the O(E) row pass (default: the available cores).

    Raises:
        InvalidArgument: an invalid graph, or the edge sampler on a graph without edges.

    Example:
        >>> from saintpipe.services.sampler.config import NodeConfig
        >>> p, alpha = inclusion_probabilities(NodeConfig(node_budget=2), np.array([0, 1, 2]), np.array([1, 0]))
        >>> p.tolist(), alpha.astype(float).round(4).tolist()  # p = 1 - (1/2)^2; alpha = (1 - 2 (1/2)^2) / p
        ([0.75, 0.75], [0.6667, 0.6667])
    """
    indptr, indices = prepare_graph(indptr, indices)
    num_nodes = indptr.size - 1
    pair_node = np.empty(0, dtype=np.float64)
    pair_const = pair_inv_deg = 0.0
    if isinstance(config, NodeConfig):
        per_draw = node_draw_probabilities(indptr, config.uniform_mix)
        draws = config.node_budget
    elif isinstance(config, EdgeConfig):
        if indices.size == 0:
            raise InvalidArgument("the edge sampler needs a graph with at least one edge")
        per_draw, total = _edge_per_draw(indptr, indices)
        per_draw /= total
        pair_inv_deg = 2.0 / total
        draws = config.edge_budget
    elif isinstance(config, RandomWalkConfig):
        visits, before_last = walk_visits(indptr, indices, config.walk_length)
        per_draw = np.minimum(visits, 1.0)
        deg = np.diff(indptr)
        # The walk steps from v along one given edge about before_last[v] / deg(v) times.
        pair_node = np.divide(before_last, deg, out=np.zeros(num_nodes), where=deg > 0)
        draws = config.roots
    elif isinstance(config, FrontierConfig):
        m = min(config.frontier_size, num_nodes)
        per_draw, pair_const = _frontier_per_draw(indptr, m, max(config.node_budget, m))
        draws = m
    else:
        raise InvalidArgument(f"unknown sampler config {config!r}")
    table = _node_table(np.ascontiguousarray(per_draw, dtype=np.float64), float(draws))
    p_node = table[:, 1].copy()
    alpha = np.empty(indices.size, dtype=np.float32)
    args = (indptr, indices, table, pair_node, pair_const, pair_inv_deg, float(draws))
    threads = threads or len(os.sched_getaffinity(0))
    threads = max(1, min(threads, num_nodes // _ROWS_PER_THREAD))
    if threads == 1:
        _alpha_rows(*args, 0, num_nodes, alpha)
    else:
        # Row ranges of about equal edge counts; the kernel releases the GIL.
        cuts = np.searchsorted(indptr, np.linspace(0, indices.size, threads + 1)).clip(0, num_nodes)
        cuts[0], cuts[-1] = 0, num_nodes
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda r: _alpha_rows(*args, int(cuts[r]), int(cuts[r + 1]), alpha), range(threads)))
    return p_node, alpha
