"""A sampler on a graph of its own ids (the training graph) hands out global ids: ``node_map``."""

from __future__ import annotations

import numpy as np
import pytest
from sampler_graphs import skewed_graph

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.config import EdgeConfig, FrontierConfig, NodeConfig, RandomWalkConfig
from saintpipe.services.sampler.sampler import make_sampler

INDPTR, INDICES = skewed_graph(2000, 6.0, seed=7)
# Global ids of the 2000 local nodes: ascending, with gaps (as a training graph's nodes.npy).
NODE_MAP = np.cumsum(np.random.default_rng(3).integers(1, 5, 2000)).astype(np.int64)
CONFIGS = [FrontierConfig(frontier_size=40, node_budget=300), RandomWalkConfig(roots=80, kappa=3),
           EdgeConfig(edge_budget=120), NodeConfig(node_budget=250)]
FIELDS = ("indptr", "indices", "edge_weights", "edge_weights_t", "loss_weights")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
def test_every_output_carries_global_ids_and_nothing_else_changes(config):
    mapped = make_sampler(config, INDPTR, INDICES, node_map=NODE_MAP)
    local = make_sampler(config, INDPTR, INDICES)
    for seed, step in ((1, None), (2, 5)):
        ref = local.sample(seed, step=step)
        sub = mapped.sample(seed, step=step, job_id="j", sequence=4)
        assert np.array_equal(sub.node_ids, NODE_MAP[ref.node_ids]) and (np.diff(sub.node_ids) > 0).all()
        assert all(np.array_equal(getattr(sub, f), getattr(ref, f)) for f in FIELDS)
        assert (sub.job_id, sub.sequence) == ("j", 4)
        assert np.array_equal(mapped.sample_nodes(seed, step=step), sub.node_ids)
        placed = mapped.sample_into(seed, lambda n, e: (np.empty(n, np.int64), np.empty(n + 1, np.int64),
                                                        np.empty(e, np.int32), np.empty(e, np.float32),
                                                        np.empty(e, np.float32), np.empty(n, np.float32)),
                                    step=step)
        assert np.array_equal(placed.node_ids, sub.node_ids)
        # The pre-sampling's view keeps the graph's own ids, which its counts index.
        arrays, _ = mapped.sample_arrays(seed, step=step)
        assert np.array_equal(arrays.node_ids, ref.node_ids)


def test_a_map_of_another_size_is_refused():
    with pytest.raises(InvalidArgument, match=r"node_map has shape \(1999,\), the graph has 2000 nodes"):
        make_sampler(NodeConfig(node_budget=10), INDPTR, INDICES, node_map=NODE_MAP[:-1])
