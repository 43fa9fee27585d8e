"""Straightforward implementations used as the tests' oracles and the benchmark's baselines.

Nothing here shares code with the kernels: it is plain numpy, written to be
obviously right rather than fast.

* :func:`frontier_direct_nodes` is Algorithm 2 as printed: at every pop it
  redraws from the whole frontier's degree distribution (cumulative sum and
  binary search, O(m) per pop).
* :func:`numpy_random_walk_nodes` is a vectorized-numpy random walk sampler.
* :func:`induce_numpy` is a vectorized induction into CSR with mean
  aggregation weights; :class:`NumpySampler` puts them together behind ``sample(seed)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from saintpipe.core.subgraph import Subgraph


def frontier_direct_nodes(indptr: np.ndarray, indices: np.ndarray, m: int, n: int,
                          rng: np.random.Generator) -> np.ndarray:
    """Algorithm 2: the sorted node set of one frontier sample (initial frontier plus popped nodes).

    The frontier is a list of m walkers (a replacement may repeat a node), like
    the Dashboard's; sampling stops early if every frontier node is isolated.
    """
    deg = np.diff(indptr)
    num_nodes = deg.size
    m = min(m, num_nodes)
    frontier = rng.choice(num_nodes, size=m, replace=False)
    frontier_deg = deg[frontier].astype(np.float64)
    sampled = np.zeros(num_nodes, dtype=bool)
    sampled[frontier] = True
    for _ in range(n - m):
        cumulative = np.cumsum(frontier_deg)
        total = cumulative[-1]
        if total <= 0:
            break
        j = int(np.searchsorted(cumulative, rng.random() * total, side="right"))
        u = frontier[j]
        u_new = indices[indptr[u] + rng.integers(deg[u])]
        frontier[j] = u_new
        frontier_deg[j] = deg[u_new]
        sampled[u] = True
    return np.flatnonzero(sampled)


def numpy_random_walk_nodes(indptr: np.ndarray, indices: np.ndarray, roots: int, walk_length: int,
                            rng: np.random.Generator) -> np.ndarray:
    """Vectorized random walks from ``roots`` uniform roots; the sorted set of visited nodes."""
    num_nodes = indptr.size - 1
    current = rng.integers(0, num_nodes, size=roots)
    visited = [current]
    for _ in range(walk_length):
        start = indptr[current]
        deg = indptr[current + 1] - start
        has_next = deg > 0
        step = (rng.random(roots) * deg).astype(np.int64)
        nxt = indices[np.where(has_next, start + step, 0)] if indices.size else current
        current = np.where(has_next, nxt, current)
        visited.append(current)
    return np.unique(np.concatenate(visited))


def induce_numpy(indptr: np.ndarray, indices: np.ndarray, node_ids: np.ndarray, seed: int = 0) -> Subgraph:
    """The subgraph induced by sorted ``node_ids``, vectorized: mean-aggregation weights, uniform loss."""
    node_ids = np.asarray(node_ids, dtype=np.int64)
    n = node_ids.size
    starts = indptr[node_ids]
    degs = indptr[node_ids + 1] - starts
    total = int(degs.sum())
    row_of = np.repeat(np.arange(n), degs)
    offsets = np.arange(total) - np.repeat(np.cumsum(degs) - degs, degs)
    cols = indices[np.repeat(starts, degs) + offsets]
    local = np.searchsorted(node_ids, cols)
    local[local == n] = 0
    keep = node_ids[local] == cols if n else np.zeros(0, dtype=bool)
    rows, local = row_of[keep], local[keep]
    counts = np.bincount(rows, minlength=n)
    sub_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=sub_indptr[1:])
    inv = np.zeros(n, dtype=np.float64)
    inv[counts > 0] = 1.0 / counts[counts > 0]
    return Subgraph(node_ids=node_ids, indptr=sub_indptr, indices=local.astype(np.int32),
                    edge_weights=inv[rows].astype(np.float32), edge_weights_t=inv[local].astype(np.float32),
                    loss_weights=np.full(n, 1.0 / max(n, 1), dtype=np.float32), seed=seed)


class NumpySampler:
    """``sample(seed)`` from one of the node-set functions above and :func:`induce_numpy`: the kernels' baselines.

    Args:
        nodes: :func:`frontier_direct_nodes` (the Dashboard's baseline, with ``m, n``) or
            :func:`numpy_random_walk_nodes` (the random-walk kernel's, with ``roots, walk_length``).
        params: its parameters between the graph and the random generator.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, nodes: Callable[..., np.ndarray],
                 *params: int) -> None:
        self.indptr, self.indices = np.asarray(indptr, dtype=np.int64), np.asarray(indices)
        self.nodes, self.params = nodes, params

    def sample(self, seed: int) -> Subgraph:
        rng = np.random.default_rng(seed)
        return induce_numpy(self.indptr, self.indices, self.nodes(self.indptr, self.indices, *self.params, rng), seed)
