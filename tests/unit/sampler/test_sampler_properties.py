"""Property tests: random graphs (isolated nodes, one node, a star with a huge hub, budgets beyond the graph).

No crash, a valid CSR equal to scipy's induced subgraph, and clear
InvalidArgument errors for impossible parameters.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sampler_graphs import assert_valid_subgraph, scipy_induced, star
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.sampler.config import parse_sampler_config
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.sampler import make_sampler

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def graphs(draw):
    shape = draw(st.sampled_from(["random", "single", "star", "empty"]))
    if shape == "single":
        return np.array([0, 0], dtype=np.int64), np.array([], dtype=np.int32)
    if shape == "star":
        return star(draw(st.integers(1, 3000)))
    n = draw(st.integers(1, 60))
    if shape == "empty":
        return edges_to_csr(np.array([], dtype=np.int64), np.array([], dtype=np.int64), n)
    m = draw(st.integers(0, 150))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    return edges_to_csr(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), n)


@st.composite
def configs(draw):
    kind = draw(st.sampled_from(["frontier", "random_walk", "edge", "node"]))
    clip = draw(st.one_of(st.none(), st.integers(1, 20)))
    budget = draw(st.integers(1, 400))  # often larger than the graph
    if kind == "frontier":
        m = draw(st.integers(1, 100))
        return {"kind": kind, "frontier_size": m, "node_budget": m + budget,
                "eta": draw(st.floats(1.01, 4.0)), "clip_multiple": clip}
    if kind == "random_walk":
        return {"kind": kind, "roots": budget, "walk_length": draw(st.integers(0, 6)), "clip_multiple": clip}
    if kind == "edge":
        return {"kind": kind, "edge_budget": budget, "clip_multiple": clip}
    return {"kind": kind, "node_budget": budget, "clip_multiple": clip}


@SETTINGS
@given(graph=graphs(), raw=configs(), seed=st.integers(0, 2**64 - 1), normalized=st.booleans())
def test_any_graph_any_budget_gives_a_valid_induced_subgraph(graph, raw, seed, normalized):
    indptr, indices = graph
    config = parse_sampler_config(raw)
    n_nodes = indptr.size - 1
    norm = None
    if normalized:
        norm = Normalization(loss_coefficients=np.ones(n_nodes, dtype=np.float32),
                             aggregator_coefficients=np.full(indices.size, 0.5, dtype=np.float32))
    if config.kind == "edge" and indices.size == 0:
        with pytest.raises(InvalidArgument, match="at least one edge"):
            make_sampler(config, indptr, indices)
        return
    sampler = make_sampler(config, indptr, indices, normalization=norm, train_nodes=np.arange(0, n_nodes, 2))
    g = sampler.sample(seed)
    assert g.num_nodes >= 1
    assert_valid_subgraph(g, n_nodes, config.clip_multiple)
    expected = scipy_induced(indptr, indices, g.node_ids)
    assert np.array_equal(g.indptr, expected.indptr) and np.array_equal(g.indices, expected.indices)
    assert g.equals(sampler.sample(seed))


@pytest.mark.parametrize("raw, field", [
    ({"kind": "frontier", "frontier_size": 0}, "frontier_size"),
    ({"kind": "frontier", "frontier_size": 100, "node_budget": 99}, "node_budget"),
    ({"kind": "frontier", "eta": 1.0}, "eta"),
    ({"kind": "random_walk", "roots": 0}, "roots"),
    ({"kind": "random_walk", "walk_length": -1}, "walk_length"),
    ({"kind": "edge", "edge_budget": -5}, "edge_budget"),
    ({"kind": "node", "node_budget": 0}, "node_budget"),
    ({"kind": "node", "clip_multiple": 0}, "clip_multiple"),
    ({"kind": "node", "budget": 5}, "budget"),
    ({"kind": "snowball"}, "kind"),
])
def test_impossible_parameters_are_invalid_arguments(raw, field):
    with pytest.raises(InvalidArgument, match=field):
        parse_sampler_config(raw)


def test_bad_seeds_graphs_train_nodes_and_normalization_are_invalid_arguments():
    indptr, indices = star(5)
    sampler = make_sampler(parse_sampler_config({"kind": "node"}), indptr, indices)
    for seed in (-1, 2**64, 1.5, True):
        with pytest.raises(InvalidArgument, match="seed"):
            sampler.sample(seed)
    config = parse_sampler_config({"kind": "random_walk"})
    bad_graphs = [
        (np.array([0]), np.array([], dtype=np.int32), "at least one node"),
        (np.array([1, 1]), np.array([0], dtype=np.int32), "indptr\\[0\\]"),
        (np.array([0, 2, 1]), np.array([0, 1], dtype=np.int32), "decreases"),
        (np.array([0, 1, 2]), np.array([1, 5], dtype=np.int32), "out of range"),
        (np.array([0, 2, 3, 4]), np.array([2, 1, 0, 0], dtype=np.int32), "ascending"),
        (np.array([0, 1, 3]), np.array([1, 0], dtype=np.int32), "entries"),
    ]
    for bad_indptr, bad_indices, message in bad_graphs:
        with pytest.raises(InvalidArgument, match=message):
            make_sampler(config, bad_indptr, bad_indices)
    with pytest.raises(InvalidArgument, match="train_nodes: node id 6"):
        make_sampler(config, indptr, indices, train_nodes=np.array([0, 6]))
    wrong = Normalization(loss_coefficients=np.ones(5, dtype=np.float32),
                          aggregator_coefficients=np.ones(indices.size, dtype=np.float32))
    with pytest.raises(InvalidArgument, match="loss_coefficients"):
        make_sampler(config, indptr, indices, normalization=wrong)
