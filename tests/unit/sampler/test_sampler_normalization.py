"""GraphSAINT normalization equals brute-force counting and does not depend on how the pre-sampling is split.

(Storing it with a dataset: tests/unit/dataset/test_dataset_normalization.py.)
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np

from sampler_graphs import random_graph
from saintpipe.services.sampler.config import FrontierConfig, RandomWalkConfig, config_key
from saintpipe.services.sampler.normalization import (PRESAMPLE_STREAM, count_presamples, count_samples,
                                                      estimate_normalization)
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


def test_shares_of_the_presampling_add_up_to_one_serial_count():
    """The sampler service's workers each count a contiguous share (count_presamples); the sums must equal
    the kernels' own estimate, whatever the split."""
    nodes, edges = count_samples(INDPTR, INDICES, CONFIG, num_subgraphs=NUM, seed=3, processes=1)
    sampler = make_sampler(CONFIG, INDPTR, INDICES)
    for bounds in ((0, NUM), (0, 5, NUM), (0, 1, 7, 11, NUM)):
        parts = [count_presamples(sampler, a, b, 3) for a, b in pairwise(bounds)]
        assert all(n.dtype == np.int32 and e.dtype == np.int32 for n, e in parts)
        assert np.array_equal(sum(n.astype(np.int64) for n, _ in parts), nodes)
        assert np.array_equal(sum(e.astype(np.int64) for _, e in parts), edges)
