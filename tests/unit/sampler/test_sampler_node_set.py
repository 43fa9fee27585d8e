"""The sampled node set as a membership bitset with word ranks (``kernels.select``).

A sampler keeps one bit per node and a rank per 64 nodes instead of a
global-to-local map of one int32 per node; these check that the bits give
exactly the set, the ranks exactly each member's position in the sorted set,
and that emptying the set leaves every word zero, across word boundaries.
"""

from __future__ import annotations

import numpy as np
import pytest

from sampler_graphs import random_graph
from saintpipe.services.sampler.config import FrontierConfig, RandomWalkConfig
from saintpipe.services.sampler.kernels.select import (bitset_words, clear_nodes, index_ranks, is_marked, local_id,
                                                       take, unmark)
from saintpipe.services.sampler.sampler import make_sampler


@pytest.mark.parametrize("num_nodes,size,seed", [(1, 1, 0), (64, 64, 1), (130, 7, 2), (10_000, 900, 3),
                                                  (10_000, 10_000, 4), (1 << 20, 3000, 5)])
def test_local_ids_are_positions_in_the_sorted_set(num_nodes, size, seed):
    rng = np.random.default_rng(seed)
    nodes = rng.choice(num_nodes, size=size, replace=False).astype(np.int32)
    bits = np.zeros(bitset_words(num_nodes), dtype=np.uint64)
    ranks = np.full(bits.size, -7, dtype=np.int32)  # stale ranks of earlier sets must not matter
    sel = np.empty(size + 1, dtype=np.int32)
    count = 0
    for v in np.concatenate([nodes, nodes[: size // 2]]):  # repeats are not taken twice
        count = take(int(v), bits, sel, count)
    assert count == size and set(sel[:count].tolist()) == set(nodes.tolist())
    node_ids = np.sort(nodes).astype(np.int64)
    index_ranks(ranks, node_ids)
    assert [local_id(bits, ranks, int(v)) for v in node_ids] == list(range(size))
    outside = np.setdiff1d(np.arange(min(num_nodes, 5000)), nodes)
    assert not any(is_marked(bits, int(v)) for v in outside)
    clear_nodes(bits, node_ids)
    assert not bits.any()


def test_unmark_takes_out_exactly_the_given_nodes():
    bits = np.zeros(bitset_words(200), dtype=np.uint64)
    sel = np.array([3, 63, 64, 65, 199], dtype=np.int32)
    count = 0
    for v in sel:
        count = take(int(v), bits, np.empty(8, np.int32), count)
    unmark(bits, sel, 1, 3)  # 63 and 64: the last bit of one word, the first of the next
    assert [int(v) for v in range(200) if is_marked(bits, v)] == [3, 65, 199]


@pytest.mark.parametrize("config", [RandomWalkConfig(roots=300, walk_length=2),
                                    FrontierConfig(frontier_size=100, node_budget=600)],
                         ids=["random_walk", "frontier"])
def test_a_sampler_holds_no_per_node_map(config):
    """Its per-node scratch is the bitset and the ranks: 8 + 4 bytes per 64 nodes, and both end each call
    with the set empty. (The node and edge samplers hold their alias tables besides.)"""
    indptr, indices = random_graph(50_000, 200_000, seed=3)
    sampler = make_sampler(config, indptr, indices)
    per_node = [a.nbytes for a in vars(sampler).values()
                if isinstance(a, np.ndarray) and a.size >= sampler.num_nodes and a.base is None
                and a is not sampler.indptr and a is not sampler.indices]
    assert sum(per_node) < sampler.num_nodes * 4, "some array of one entry per node is private to the sampler"
    for seed in range(3):
        sampler.sample(seed)
        sampler.sample_nodes(seed)
        assert not sampler._bits.any()
