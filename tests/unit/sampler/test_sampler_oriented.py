"""Induction through the degree-ordered orientation gives the plain scan's subgraphs, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from sampler_graphs import random_graph, skewed_graph, star
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import EdgeConfig, FrontierConfig, NodeConfig, RandomWalkConfig, config_key
from saintpipe.services.sampler.kernels.oriented import EMPTY, orient_graph
from saintpipe.services.sampler.sampler import make_sampler

CONFIGS = [
    FrontierConfig(frontier_size=20, node_budget=120),
    RandomWalkConfig(roots=40, walk_length=3),
    EdgeConfig(edge_budget=60),
    NodeConfig(node_budget=90),
]


def _with_self_loops(indptr, indices, nodes):
    """The graph plus a self-loop on each of ``nodes``."""
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return _csr(np.concatenate([rows, nodes]), np.concatenate([indices, nodes]), indptr.size - 1)


def _csr(src, dst, n):
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    first = np.ones(src.size, dtype=bool)
    first[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    src, dst = src[first], dst[first]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, src + 1, 1)
    return np.cumsum(indptr), dst.astype(np.int32)


GRAPHS = {
    "sparse": random_graph(300, 500, seed=1, isolated=40),
    "dense": random_graph(120, 1500, seed=2),
    "skewed": skewed_graph(400, 6.0, seed=3),
    "star": star(200),
    "self-loops": _with_self_loops(*skewed_graph(300, 5.0, seed=4), np.array([0, 1, 7, 50, 299])),
}


@pytest.mark.parametrize("graph", GRAPHS)
def test_the_lists_hold_each_edge_once_from_its_lower_ranked_end(graph):
    indptr, indices = GRAPHS[graph]
    o = orient_graph(indptr, indices)
    degree = np.diff(indptr)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    rank = np.lexsort((np.arange(degree.size), degree)).argsort()  # position in (degree, id) order
    expected = (rank[indices] > rank[rows]) | (indices == rows)
    o_rows = np.repeat(np.arange(o.indptr.size - 1), np.diff(o.indptr))
    assert o.indptr[-1] == expected.sum()
    np.testing.assert_array_equal(o.columns, indices[expected])  # the rows' order: ascending in each list
    np.testing.assert_array_equal(o.forward, np.flatnonzero(expected))
    # reverse: the entry (w, v) of each oriented (v, w)
    assert (indices[o.reverse] == o_rows).all()
    assert (rows[o.reverse] == o.columns).all()
    loops = o.columns == o_rows
    assert (o.reverse[loops] == o.forward[loops]).all()
    if graph == "star":
        assert np.diff(o.indptr)[0] == 0  # the hub outranks every leaf: its list is empty


def test_a_hub_list_is_short_on_a_skewed_graph():
    indptr, indices = skewed_graph(5000, 8.0, seed=5)
    o = orient_graph(indptr, indices)
    assert np.diff(indptr).max() > 10 * np.diff(o.indptr).max()
    assert np.diff(o.indptr).max() <= np.sqrt(2 * indices.size) + 1  # the degree-ordering bound


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
def test_oriented_and_scanning_induction_give_the_same_subgraphs(graph, config):
    indptr, indices = GRAPHS[graph]
    n = indptr.size - 1
    rng = np.random.default_rng(0)
    norm = Normalization(loss_coefficients=rng.uniform(0.5, 2, n).astype(np.float32),
                         aggregator_coefficients=rng.uniform(0.1, 1, indices.size).astype(np.float32))
    train = np.arange(0, n, 3)
    oriented = make_sampler(config, indptr, indices, normalization=norm, train_nodes=train)
    scanning = make_sampler(config.model_copy(update={"induction": "scan"}), indptr, indices,
                            normalization=norm, train_nodes=train)
    assert oriented.orientation.indptr.size == n + 1 and scanning.orientation is EMPTY
    for seed in range(8):
        a, a_pos = oriented.sample_arrays(seed)
        b, b_pos = scanning.sample_arrays(seed)
        assert a.equals(b)
        np.testing.assert_array_equal(a_pos, b_pos)


def test_sample_into_and_a_shared_orientation_give_the_same_subgraph():
    indptr, indices = skewed_graph(400, 6.0, seed=3)
    config = FrontierConfig(frontier_size=20, node_budget=120)
    shared = orient_graph(indptr, indices)
    a = make_sampler(config, indptr, indices, orientation=shared)
    b = make_sampler(config.model_copy(update={"induction": "scan"}), indptr, indices)
    placed = {}

    def place(n, e):
        placed["arrays"] = (np.empty(n, np.int64), np.empty(n + 1, np.int64), np.empty(e, np.int32),
                            np.empty(e, np.float32), np.empty(e, np.float32), np.empty(n, np.float32))
        return placed["arrays"]

    assert a.sample_into(5, place).equals(b.sample(5))
    with pytest.raises(InvalidArgument, match="orientation has 3 nodes"):
        make_sampler(config, indptr, indices, orientation=orient_graph(*star(2)))


def test_a_directed_graph_is_not_oriented_and_is_still_reported():
    src = np.array([0, 0, 1])
    dst = np.array([1, 2, 2])  # one direction only
    directed = _csr(src, dst, 3)
    assert orient_graph(*directed) is None
    sampler = make_sampler(NodeConfig(node_budget=3, clip_multiple=None), *directed, check_graph=False)
    assert sampler.orientation is EMPTY
    with pytest.raises(InvalidArgument, match="not symmetric"):
        for seed in range(20):
            sampler.sample(seed)


def test_the_induction_mode_does_not_change_the_normalization_key():
    config = RandomWalkConfig()
    assert config.induction == "oriented"
    assert config_key(config) == config_key(config.model_copy(update={"induction": "scan"}))
