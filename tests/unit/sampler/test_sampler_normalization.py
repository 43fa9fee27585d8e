"""GraphSAINT normalization equals brute-force counting, and is stored and reused with the dataset."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from sampler_graphs import random_graph
from saintpipe.services.dataset.store import write_dataset
from saintpipe.services.sampler import normalization as norm_mod
from saintpipe.services.sampler.config import FrontierConfig, RandomWalkConfig, config_key
from saintpipe.services.sampler.normalization import (PRESAMPLE_STREAM, estimate_normalization, load_or_estimate,
                                            norm_dir)
from saintpipe.services.sampler.parallel import stream_seed
from saintpipe.services.sampler.sampler import make_sampler

INDPTR, INDICES = random_graph(80, 160, seed=21, isolated=6)
CONFIG = RandomWalkConfig(roots=4, walk_length=2, clip_multiple=4)
NUM = 12
TRAIN = np.arange(0, 80, 2)


def _brute_force(indptr, indices, config, num, train):
    """Count nodes and (v, u) pairs of the pre-sampled subgraphs in plain Python; apply GraphSAINT's rules."""
    sampler = make_sampler(config, indptr, indices)
    node_count, edge_count = Counter(), Counter()
    for i in range(num):
        g = sampler.sample(stream_seed(0, PRESAMPLE_STREAM, i))
        ids = g.node_ids.tolist()
        for local_v, v in enumerate(ids):
            node_count[v] += 1
            for k in range(g.indptr[local_v], g.indptr[local_v + 1]):
                edge_count[(v, ids[g.indices[k]])] += 1
    n = indptr.size - 1
    alpha = np.empty(indices.size, dtype=np.float64)
    for v in range(n):
        for k in range(indptr[v], indptr[v + 1]):
            cv, ce = node_count[v], edge_count[(v, int(indices[k]))]
            alpha[k] = 10.0 if cv == 0 else max(ce / cv, 1e-4)
    loss = np.zeros(n, dtype=np.float64)
    train_set = set(train.tolist())
    for v in train_set:
        loss[v] = num / (node_count[v] or 0.1) / len(train_set)
    return loss.astype(np.float32), alpha.astype(np.float32), node_count


def test_coefficients_equal_brute_force_counting():
    loss, alpha, node_count = _brute_force(INDPTR, INDICES, CONFIG, NUM, TRAIN)
    assert 0 < len(node_count) < 80, "some nodes must stay unsampled to exercise the C(v) = 0 rule"
    norm = estimate_normalization(INDPTR, INDICES, CONFIG, num_subgraphs=NUM, train_nodes=TRAIN, processes=2)
    assert np.array_equal(norm.loss_coefficients, loss)
    assert np.array_equal(norm.aggregator_coefficients, alpha)
    assert norm.num_subgraphs == NUM and norm.config_key == config_key(CONFIG)
    assert np.any(alpha == 10.0) and np.any((alpha > 0) & (alpha < 1))


def test_result_does_not_depend_on_the_number_of_processes():
    config = FrontierConfig(frontier_size=5, node_budget=30)
    one = estimate_normalization(INDPTR, INDICES, config, num_subgraphs=25, processes=1)
    two = estimate_normalization(INDPTR, INDICES, config, num_subgraphs=25, processes=2)
    assert np.array_equal(one.loss_coefficients, two.loss_coefficients)
    assert np.array_equal(one.aggregator_coefficients, two.aggregator_coefficients)
    other_seed = estimate_normalization(INDPTR, INDICES, config, num_subgraphs=25, processes=1, seed=1)
    assert not np.array_equal(one.aggregator_coefficients, other_seed.aggregator_coefficients)


@pytest.fixture
def dataset_dir(tmp_path):
    n = INDPTR.size - 1
    write_dataset(tmp_path / "ds", name="tiny", indptr=INDPTR, indices=INDICES,
                  features=np.zeros((n, 2), dtype=np.float32), labels=np.zeros(n, dtype=np.int64),
                  splits={"train": TRAIN, "val": np.array([1, 3]), "test": np.array([5, 7])})
    return tmp_path / "ds"


def test_stored_with_the_dataset_and_reused(dataset_dir, monkeypatch):
    first = load_or_estimate(dataset_dir, CONFIG, NUM, processes=1)
    where = norm_dir(dataset_dir, CONFIG)
    assert where == dataset_dir / "norm" / config_key(CONFIG)
    meta = json.loads((where / "meta.json").read_text())
    assert meta["num_subgraphs"] == NUM and meta["config"]["kind"] == "random_walk"
    assert not list((dataset_dir / "norm").glob(".*")), "no temporary directory left behind"
    expected_loss, _, _ = _brute_force(INDPTR, INDICES, CONFIG, NUM, TRAIN)  # the dataset's train split
    assert np.array_equal(first.loss_coefficients, expected_loss)

    def must_not_sample(*args, **kwargs):
        raise AssertionError("the stored normalization should have been reused")

    monkeypatch.setattr(norm_mod, "estimate_normalization", must_not_sample)
    again = load_or_estimate(dataset_dir, CONFIG, NUM, processes=1)
    assert np.array_equal(again.aggregator_coefficients, first.aggregator_coefficients)
    # Another subgraph count is another estimate.
    with pytest.raises(AssertionError, match="reused"):
        load_or_estimate(dataset_dir, CONFIG, NUM + 1, processes=1)


def test_sampler_uses_stored_normalization(dataset_dir):
    norm = load_or_estimate(dataset_dir, CONFIG, NUM, processes=1)
    sampler = make_sampler(CONFIG, INDPTR, INDICES, normalization=norm, train_nodes=TRAIN)
    g = sampler.sample(3)
    expected = np.where(np.isin(g.node_ids, TRAIN), norm.loss_coefficients[g.node_ids], 0)
    assert np.array_equal(g.loss_weights, expected)
