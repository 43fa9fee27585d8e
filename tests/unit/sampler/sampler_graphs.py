"""Small graphs and an independent (scipy) induction for the sampler tests."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from saintpipe.services.dataset.csr import edges_to_csr


def random_graph(num_nodes: int, num_edges: int, seed: int, *,
                 isolated: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A random undirected graph in CSR (sorted rows); the last ``isolated`` nodes have no edge."""
    rng = np.random.default_rng(seed)
    connected = max(num_nodes - isolated, 1)
    src = rng.integers(0, connected, size=num_edges)
    dst = rng.integers(0, connected, size=num_edges)
    return edges_to_csr(src, dst, num_nodes)


def skewed_graph(num_nodes: int, mean_degree: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A Chung-Lu graph with power-law expected degrees: hubs and many small nodes."""
    rng = np.random.default_rng(seed)
    weights = (np.arange(1, num_nodes + 1, dtype=np.float64)) ** -0.7
    weights /= weights.sum()
    num_edges = int(num_nodes * mean_degree / 2)
    src = rng.choice(num_nodes, size=num_edges, p=weights)
    dst = rng.choice(num_nodes, size=num_edges, p=weights)
    return edges_to_csr(src, dst, num_nodes)


def star(num_leaves: int) -> tuple[np.ndarray, np.ndarray]:
    """Node 0 is a hub joined to every other node."""
    leaves = np.arange(1, num_leaves + 1)
    return edges_to_csr(np.zeros(num_leaves, dtype=np.int64), leaves, num_leaves + 1)


def scipy_induced(indptr: np.ndarray, indices: np.ndarray, node_ids: np.ndarray) -> sp.csr_matrix:
    """The induced subgraph by scipy slicing (rows and columns in ``node_ids`` order)."""
    n = indptr.size - 1
    adj = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
    sub = adj[node_ids][:, node_ids].tocsr()
    sub.sort_indices()
    return sub


def assert_valid_subgraph(g, num_nodes: int, clip_multiple: int | None = None) -> None:
    """Every convention of saintpipe/core/subgraph.py, checked independently of the kernels."""
    n, e = g.num_nodes, g.num_edges
    assert g.node_ids.dtype == np.int64 and g.indptr.dtype == np.int64 and g.indices.dtype == np.int32
    assert g.edge_weights.dtype == g.edge_weights_t.dtype == g.loss_weights.dtype == np.float32
    assert np.all(np.diff(g.node_ids) > 0), "node ids sorted and distinct"
    assert n == 0 or (g.node_ids[0] >= 0 and g.node_ids[-1] < num_nodes)
    assert g.indptr.shape == (n + 1,) and g.indptr[0] == 0 and g.indptr[-1] == e
    assert np.all(np.diff(g.indptr) >= 0)
    assert g.edge_weights.shape == g.edge_weights_t.shape == (e,) and g.loss_weights.shape == (n,)
    if e:
        assert g.indices.min() >= 0 and g.indices.max() < n
        rows = np.repeat(np.arange(n), np.diff(g.indptr))
        same_row = rows[1:] == rows[:-1]
        assert np.all(np.diff(g.indices)[same_row] > 0), "rows sorted, no duplicates"
        assert np.all(np.isfinite(g.edge_weights)) and np.all(g.edge_weights > 0)
        assert np.all(np.isfinite(g.edge_weights_t)) and np.all(g.edge_weights_t > 0)
    assert np.all(g.loss_weights >= 0) and np.all(np.isfinite(g.loss_weights))
    if clip_multiple and n >= clip_multiple:
        assert n % clip_multiple == 0
