"""Node sets expanded on the trainer's copy of the topology equal, bit for bit, what the sampler sends whole."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from saintpipe.core.errors import ConfigError, DecodeError
from saintpipe.core.subgraph import Induction, SubgraphNodes
from saintpipe.services.dataset import normalization as stored_normalization
from saintpipe.services.dataset.sample_graph import train_digest
from saintpipe.minibatch.expand import SubgraphExpander
from saintpipe.services.dataset.normalization import load_or_estimate, norm_dir
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.pool.codec import encode_subgraph
from saintpipe.services.pool.codec.compact import decode_entry, encode_nodes
from saintpipe.services.sampler.config import parse_sampler_config
from saintpipe.services.sampler_service.worker import build_sampler, induction_for
from tests.support.small_samplers import SMALL_SAMPLERS

KINDS = SMALL_SAMPLERS


@pytest.fixture(scope="module")
def dataset(demo_1500):
    return demo_1500


def through_the_pool(sampler, dataset, norm, seed: int, step: int | None = None) -> SubgraphNodes:
    """What a worker in the nodes wire puts, as a trainer decodes it."""
    ids = sampler.sample_nodes(seed) if step is None else sampler.sample_nodes(seed, step=step)
    data = encode_nodes(SubgraphNodes(ids, induction_for(dataset, norm), job_id="j", worker=1, sequence=seed,
                                      seed=seed))
    return decode_entry(data)


@pytest.mark.parametrize("normalized", [False, True], ids=["plain", "normalized"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_expanded_subgraph_is_the_sampler_s_bit_for_bit(dataset, kind, normalized):
    config = parse_sampler_config({"kind": kind, **KINDS[kind]})
    norm = load_or_estimate(dataset, config, 12, seed=1, processes=1) if normalized else None
    sampler = build_sampler(config, dataset, norm)
    expander = SubgraphExpander(dataset)
    for seed in range(6):
        whole = sampler.sample(seed, job_id="j", worker=1, sequence=seed)
        expanded = expander(through_the_pool(sampler, dataset, norm, seed))
        assert expanded.equals(whole), (kind, normalized, seed)
        assert encode_subgraph(expanded) == encode_subgraph(whole)  # the very bytes wire full would carry
    assert whole.num_edges > 0 and (not normalized or whole.edge_weights.std() > 0)


def test_dependent_minibatches_expand_alike(dataset):
    config = parse_sampler_config({"kind": "random_walk", "roots": 60, "kappa": 4})
    sampler = build_sampler(config, dataset, None)
    expander = SubgraphExpander(dataset)
    for step in range(3):
        whole = sampler.sample(9, job_id="j", worker=1, sequence=9, step=step)
        assert expander(through_the_pool(sampler, dataset, None, 9, step=step)).equals(whole)


def test_an_entry_this_dataset_cannot_induce_is_a_config_error_naming_the_fix(dataset, tmp_path):
    config = parse_sampler_config({"kind": "node", "node_budget": 100})
    norm = load_or_estimate(dataset, config, 10, seed=3, processes=1)
    sampler = build_sampler(config, dataset, norm)
    good = through_the_pool(sampler, dataset, norm, 4)
    expander = SubgraphExpander(dataset)
    ind = good.induction

    def with_induction(**changes) -> SubgraphNodes:
        return SubgraphNodes(good.node_ids, Induction(**{**ind.__dict__, **changes}))

    with pytest.raises(ConfigError, match="graph of 1501 nodes .* has 1500"):
        expander(with_induction(graph_nodes=1501))
    with pytest.raises(ConfigError, match="train split .* digest"):
        expander(with_induction(train_nodes="0123456789abcdef"))
    with pytest.raises(ConfigError, match="normalization node-00.*missing.*wire 'full'"):
        expander(with_induction(normalization="node-0011223344556677"))
    with pytest.raises(ConfigError, match="other settings .*num_subgraphs 10 != 11"):
        expander(with_induction(norm_subgraphs=11))
    # A trainer on a copy of the dataset without the samplers' norm/ folder.
    copy = tmp_path / "copy"
    shutil.copytree(dataset.path, copy, ignore=shutil.ignore_patterns("norm"))
    with pytest.raises(ConfigError, match=f"{copy}/norm/node-"):
        SubgraphExpander(open_dataset(copy))(good)
    assert expander(good).equals(sampler.sample(4, job_id="j", worker=1, sequence=4))  # the entry was fine


def test_ids_outside_the_graph_are_a_decode_error(dataset):
    expander = SubgraphExpander(dataset)
    outside = SubgraphNodes(np.array([3, dataset.num_nodes], dtype=np.int64), induction_for(dataset, None))
    with pytest.raises(DecodeError, match="outside"):
        expander(outside)


def test_the_file_layout_is_the_one_the_normalization_store_writes(dataset):
    config = parse_sampler_config({"kind": "edge", "edge_budget": 50})
    norm = load_or_estimate(dataset, config, 8, seed=0, processes=1)
    loss, alpha, meta = stored_normalization.read_stored(norm_dir(dataset.path, config))
    assert np.array_equal(loss, norm.loss_coefficients) and np.array_equal(alpha, norm.aggregator_coefficients)
    assert meta["train_nodes"] == train_digest(dataset.splits["train"])
    assert json.loads((norm_dir(dataset.path, config) / stored_normalization.META_NAME).read_text())["config_key"] == meta[
        "config_key"]
