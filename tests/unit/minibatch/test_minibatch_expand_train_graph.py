"""Node sets drawn from the training graph expand, on a trainer, into the sampler's subgraphs bit for bit."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.core.subgraph import SubgraphNodes
from saintpipe.minibatch.expand import SubgraphExpander
from saintpipe.services.dataset.normalization import graph_norm_dir, load_or_estimate, store_normalization
from saintpipe.services.dataset.sample_graph import open_sample_graph
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.pool.codec import encode_subgraph
from saintpipe.services.pool.codec.compact import decode_entry, encode_nodes
from saintpipe.services.sampler.config import parse_sampler_config
from saintpipe.services.sampler.normalization import build_normalization
from saintpipe.services.sampler_service.worker import build_sampler, induction_for
from tests.support.small_samplers import SMALL_SAMPLERS

KINDS = SMALL_SAMPLERS


@pytest.fixture(scope="module")
def dataset(demo_1500):
    return demo_1500


@pytest.fixture(scope="module")
def graph(dataset):
    return open_sample_graph(dataset, "train")


def through_the_pool(sampler, graph, norm, seed: int, step: int | None = None) -> SubgraphNodes:
    ids = sampler.sample_nodes(seed) if step is None else sampler.sample_nodes(seed, step=step)
    data = encode_nodes(SubgraphNodes(ids, induction_for(graph, norm), job_id="j", worker=1, sequence=seed,
                                      seed=seed))
    return decode_entry(data)


def normalization(graph, config, method: str):
    if method == "none":
        return None
    if method == "reference":
        return load_or_estimate(graph, config, 12, seed=1, processes=1)
    norm = build_normalization(graph.indptr, graph.indices, config, method=method)
    assert store_normalization(graph, config, norm)
    return norm


# exact: the closed forms exist for the node and edge samplers only.
CASES = [(kind, method) for kind in KINDS for method in ("none", "reference", "exact")
         if method != "exact" or kind in ("node", "edge")]


@pytest.mark.parametrize(("kind", "method"), CASES)
def test_expanded_on_the_training_graph_the_subgraph_is_the_sampler_s(dataset, graph, kind, method):
    config = parse_sampler_config({"kind": kind, **KINDS[kind]})
    norm = normalization(graph, config, method)
    sampler = build_sampler(config, graph, norm)
    expander = SubgraphExpander(dataset)
    train = set(dataset.splits["train"].tolist())
    for seed in range(5):
        whole = sampler.sample(seed, job_id="j", worker=1, sequence=seed)
        assert set(whole.node_ids.tolist()) <= train  # global ids, training nodes only
        expanded = expander(through_the_pool(sampler, graph, norm, seed))
        assert expanded.equals(whole), (kind, method, seed)
        assert encode_subgraph(expanded) == encode_subgraph(whole)
    if norm is not None:
        # The coefficients the trainer looked up are the training graph's, stored apart from the full graph's.
        directory = graph_norm_dir(graph, config, norm.method)
        assert directory.name.endswith(".train")
        meta = json.loads((directory / "meta.json").read_text())
        assert (meta["graph"], meta["graph_nodes"], meta["graph_edges"]) == ("train", graph.num_nodes,
                                                                             graph.num_edges)
        assert (meta["num_nodes"], meta["num_edges"]) == (dataset.num_nodes, dataset.num_edges)
        assert whole.edge_weights.std() > 0


def test_dependent_minibatches_on_the_training_graph_expand_alike(dataset, graph):
    config = parse_sampler_config({"kind": "random_walk", "roots": 60, "kappa": 4})
    norm = load_or_estimate(graph, config, 8, seed=2, processes=1)
    sampler = build_sampler(config, graph, norm)
    expander = SubgraphExpander(dataset)
    for step in range(3):
        whole = sampler.sample(9, job_id="j", worker=1, sequence=9, step=step)
        assert expander(through_the_pool(sampler, graph, norm, 9, step=step)).equals(whole)


def test_a_trainer_without_the_training_graph_is_told_where_it_is_missing(dataset, graph, tmp_path):
    config = parse_sampler_config({"kind": "node", "node_budget": 100})
    norm = load_or_estimate(graph, config, 6, seed=3, processes=1)
    sampler = build_sampler(config, graph, norm)
    copy = tmp_path / "copy"
    shutil.copytree(dataset.path, copy, ignore=shutil.ignore_patterns("train_graph"))
    with pytest.raises(ConfigError, match=r"made on the training graph.*train_graph is missing"):
        SubgraphExpander(open_dataset(copy))(through_the_pool(sampler, graph, norm, 1))


def test_the_full_graph_s_normalization_is_not_the_training_graph_s(dataset, graph):
    config = parse_sampler_config({"kind": "edge", "edge_budget": 150})
    full = load_or_estimate(dataset, config, 6, seed=4, processes=1)
    train = load_or_estimate(graph, config, 6, seed=4, processes=1)
    assert full.loss_coefficients.shape == (dataset.num_nodes,)
    assert train.loss_coefficients.shape == (graph.num_nodes,)
    assert graph_norm_dir(dataset, config) != graph_norm_dir(graph, config)
    assert np.array_equal(load_or_estimate(graph, config, 6, seed=4, processes=1).aggregator_coefficients,
                          train.aggregator_coefficients)  # reused from its own folder
