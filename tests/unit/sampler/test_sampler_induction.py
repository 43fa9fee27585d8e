"""Induced subgraphs equal scipy slicing; weights, transposed weights and loss weights are as defined."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sampler_graphs import assert_valid_subgraph, random_graph, scipy_induced, skewed_graph
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.config import EdgeConfig, FrontierConfig, NodeConfig, RandomWalkConfig
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.sampler import make_sampler

CONFIGS = [
    FrontierConfig(frontier_size=20, node_budget=120, clip_multiple=None),
    RandomWalkConfig(roots=40, walk_length=3, clip_multiple=None),
    EdgeConfig(edge_budget=60, clip_multiple=None),
    NodeConfig(node_budget=90, clip_multiple=None),
]
GRAPHS = {
    "sparse-with-isolated": random_graph(300, 500, seed=1, isolated=40),
    "dense": random_graph(120, 1500, seed=2),
    "skewed": skewed_graph(400, 6.0, seed=3),
}


def _transposed_data(g) -> np.ndarray:
    """The data of the transpose of (indptr, indices, edge_weights), in the same CSR order (scipy)."""
    n = g.num_nodes
    w = sp.csr_matrix((g.edge_weights.astype(np.float64), g.indices, g.indptr), shape=(n, n))
    wt = w.T.tocsr()
    wt.sort_indices()
    assert np.array_equal(wt.indptr, g.indptr) and np.array_equal(wt.indices, g.indices)
    return wt.data


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
def test_induced_subgraph_equals_scipy_slicing(graph, config):
    indptr, indices = GRAPHS[graph]
    sampler = make_sampler(config, indptr, indices)
    for seed in range(5):
        g = sampler.sample(seed)
        assert g.num_nodes > 0
        assert_valid_subgraph(g, indptr.size - 1)
        expected = scipy_induced(indptr, indices, g.node_ids)
        assert np.array_equal(g.indptr, expected.indptr)
        assert np.array_equal(g.indices, expected.indices)
        # Without normalization: mean aggregation inside the subgraph.
        deg_sub = np.diff(g.indptr)
        assert np.array_equal(g.edge_weights, np.repeat(1.0 / deg_sub[deg_sub > 0], deg_sub[deg_sub > 0])
                              .astype(np.float32))
        assert np.array_equal(g.edge_weights_t, _transposed_data(g).astype(np.float32))
        assert np.allclose(g.loss_weights, 1.0 / g.num_nodes)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
def test_normalized_weights_and_their_transpose(config):
    indptr, indices = GRAPHS["skewed"]
    n_nodes, n_edges = indptr.size - 1, indices.size
    rng = np.random.default_rng(0)
    norm = Normalization(loss_coefficients=rng.uniform(0.1, 2, n_nodes).astype(np.float32),
                         aggregator_coefficients=rng.uniform(0.05, 1, n_edges).astype(np.float32))
    train = np.flatnonzero(rng.random(n_nodes) < 0.5)
    sampler = make_sampler(config, indptr, indices, normalization=norm, train_nodes=train)
    g = sampler.sample(11)
    assert_valid_subgraph(g, n_nodes)
    # Expected weight of entry (row v, column u): 1 / (deg(v) * alpha at the full graph's position of (v, u)).
    rows = g.node_ids[np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))]
    cols = g.node_ids[g.indices]
    positions = np.array([indptr[v] + np.searchsorted(indices[indptr[v]:indptr[v + 1]], u)
                          for v, u in zip(rows, cols)], dtype=np.int64)
    assert np.array_equal(indices[positions], cols)
    deg = np.diff(indptr)
    alpha = norm.aggregator_coefficients[positions].astype(np.float64)
    expected = ((1.0 / deg[rows]) / alpha).astype(np.float32)
    assert np.array_equal(g.edge_weights, expected)
    assert np.array_equal(g.edge_weights_t, _transposed_data(g).astype(np.float32))
    is_train = np.isin(g.node_ids, train)
    assert np.array_equal(g.loss_weights, np.where(is_train, norm.loss_coefficients[g.node_ids], 0))
    # The positions sample_arrays reports are the same ones.
    _, eids = sampler.sample_arrays(11)
    assert np.array_equal(eids, positions)


def test_uniform_loss_over_training_nodes():
    indptr, indices = GRAPHS["dense"]
    train = np.arange(0, 120, 3)
    g = make_sampler(NodeConfig(node_budget=60), indptr, indices, train_nodes=train).sample(5)
    is_train = np.isin(g.node_ids, train)
    assert is_train.any() and not is_train.all()
    assert np.allclose(g.loss_weights[is_train], 1.0 / is_train.sum())
    assert np.all(g.loss_weights[~is_train] == 0)


@pytest.mark.parametrize("clip", [16, 7])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
def test_clipping_drops_random_nodes_to_a_multiple(config, clip):
    indptr, indices = GRAPHS["sparse-with-isolated"]
    full = make_sampler(config, indptr, indices)
    clipped = make_sampler(config.model_copy(update={"clip_multiple": clip}), indptr, indices)
    dropped_any = False
    for seed in range(6):
        a, b = full.sample(seed), clipped.sample(seed)
        # Clipping happens after selection, from the same stream: a subset of the same node set.
        assert b.num_nodes == a.num_nodes - a.num_nodes % clip
        assert np.all(np.isin(b.node_ids, a.node_ids))
        dropped_any |= b.num_nodes < a.num_nodes
        expected = scipy_induced(indptr, indices, b.node_ids)
        assert np.array_equal(b.indices, expected.indices) and np.array_equal(b.indptr, expected.indptr)
    assert dropped_any


def test_directed_graph_is_reported():
    # 0 -> 1 without 1 -> 0: the induced pattern is not symmetric, Algorithm 6 cannot apply.
    indptr = np.array([0, 1, 1], dtype=np.int64)
    indices = np.array([1], dtype=np.int32)
    sampler = make_sampler(EdgeConfig(edge_budget=1, clip_multiple=None), indptr, indices)
    with pytest.raises(InvalidArgument, match="not symmetric"):
        sampler.sample(0)
