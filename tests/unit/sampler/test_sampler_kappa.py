"""Dependent minibatches (kappa): today's subgraphs at kappa=1, overlap along a chain, the law of one subgraph.

The statistical tests use fixed seeds (so they are deterministic) and check
their own power: the same statistic against a slightly different law rejects.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from sampler_graphs import assert_valid_subgraph, random_graph, skewed_graph
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.feature_shard.cache import FeatureCache
from saintpipe.services.sampler.config import (
    EdgeConfig,
    FrontierConfig,
    NodeConfig,
    RandomWalkConfig,
    config_key,
    parse_sampler_config,
)
from saintpipe.services.sampler.kernels.dependent import slot_seed
from saintpipe.services.sampler.parallel import chain_key
from saintpipe.services.sampler.sampler import make_sampler

SMALL = [
    {"kind": "frontier", "frontier_size": 20, "node_budget": 120},
    {"kind": "random_walk", "roots": 40, "walk_length": 3},
    {"kind": "edge", "edge_budget": 60},
    {"kind": "node", "node_budget": 90, "uniform_mix": 0.0},
]
FIELDS = ("node_ids", "indptr", "indices", "edge_weights", "edge_weights_t", "loss_weights")

# sha256 over the subgraphs of seeds (0, 1, 2**63 + 5, 12345), recorded before kappa existed (frontier: again
# when a frontier node's replacement came to be drawn as it joins, which reorders the random stream, and when
# the sum tree became the default: one draw per pop, where the dashboard probed and retried; edge: when edges
# came to be drawn by their end points, and nodes by a uniform position's column, without tables).
TODAY = {
    ("random", "frontier"): "aa41870f67eb77628d09b9b836b75468",
    ("random", "random_walk"): "3c30d2978170eb1f14deca153703d30e",
    ("random", "edge"): "6c45e63c519c0a68befadc7745457ec4",
    ("random", "node"): "1aec9c69fe2a3ac4110714374bebbd05",
    ("skewed", "frontier"): "a763dc733bffe730589cb4b2f85cda29",
    ("skewed", "random_walk"): "255588a0d4254401ee272ebcec1adbcf",
    ("skewed", "edge"): "9ff3f8e3389c0ecb56a8607dcba36f4d",
    ("skewed", "node"): "63a45395da55891d616bdff06fd0a7b7",
}
GRAPHS = {"random": random_graph(300, 1500, seed=3), "skewed": skewed_graph(400, 8.0, seed=5)}


def _digest(subgraphs) -> str:
    outer = hashlib.sha256()
    for g in subgraphs:
        inner = hashlib.sha256()
        for name in FIELDS:
            inner.update(np.ascontiguousarray(getattr(g, name)).tobytes())
        outer.update(inner.hexdigest()[:16].encode())
    return outer.hexdigest()[:32]


def _sampler(cfg: dict, graph=GRAPHS["skewed"], **kwargs):
    indptr, indices = graph
    return make_sampler(parse_sampler_config(cfg), indptr, indices, **kwargs)


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("cfg", SMALL, ids=[c["kind"] for c in SMALL])
def test_kappa_1_draws_todays_subgraphs_bit_for_bit_with_or_without_a_step(graph, cfg):
    indptr, indices = GRAPHS[graph]
    train = np.arange(0, indptr.size - 1, 2)
    seeds = (0, 1, 2**63 + 5, 12345)
    explicit = make_sampler(parse_sampler_config({**cfg, "kappa": 1}), indptr, indices, train_nodes=train, chain=9)
    assert _digest(explicit.sample(s) for s in seeds) == TODAY[graph, cfg["kind"]]
    assert _digest(explicit.sample(s, step=t) for t, s in enumerate(seeds)) == TODAY[graph, cfg["kind"]]
    assert not explicit.dependent
    # kappa > 1 without a step (the pre-sampling's calls) is the same independent draw.
    dependent = make_sampler(parse_sampler_config({**cfg, "kappa": 16}), indptr, indices, train_nodes=train, chain=9)
    assert dependent.dependent
    assert _digest(dependent.sample(s) for s in seeds) == TODAY[graph, cfg["kind"]]


def _jaccard_along_chain(cfg: dict, kappa: int, steps: int = 120) -> float:
    sampler = _sampler({**cfg, "kappa": kappa}, chain=chain_key(5, 0))
    sets = [set(sampler.sample(1000 + t, step=t).node_ids.tolist()) for t in range(steps)]
    return float(np.mean([len(a & b) / len(a | b) for a, b in zip(sets, sets[1:])]))


@pytest.mark.parametrize("cfg", SMALL, ids=[c["kind"] for c in SMALL])
def test_consecutive_subgraphs_of_a_chain_overlap_far_more_with_kappa(cfg):
    independent = _jaccard_along_chain(cfg, 1)
    assert independent < 0.25
    # About 1/kappa of the slots change per step (plus what clipping and collisions move).
    assert _jaccard_along_chain(cfg, 4) > independent + 0.3
    assert _jaccard_along_chain(cfg, 16) > 0.75


@pytest.mark.parametrize("cfg", SMALL, ids=[c["kind"] for c in SMALL])
def test_a_dependent_subgraph_is_valid_deterministic_and_the_same_through_every_entry_point(cfg):
    indptr, indices = GRAPHS["random"]
    train = np.arange(0, indptr.size - 1, 3)
    a = make_sampler(parse_sampler_config({**cfg, "kappa": 8}), indptr, indices, train_nodes=train, chain=77)
    b = make_sampler(parse_sampler_config({**cfg, "kappa": 8}), indptr, indices, train_nodes=train, chain=77)
    other_chain = make_sampler(parse_sampler_config({**cfg, "kappa": 8}), indptr, indices, train_nodes=train,
                               chain=78)
    for step in (0, 7, 8, 1000):
        g = a.sample(42, step=step)
        assert_valid_subgraph(g, indptr.size - 1, clip_multiple=16)
        assert g.equals(b.sample(42, step=step))
        assert np.array_equal(a.sample_nodes(42, step=step), g.node_ids)
        placed = a.sample_into(42, lambda n, e: (np.empty(n, np.int64), np.empty(n + 1, np.int64),
                                                 np.empty(e, np.int32), np.empty(e, np.float32),
                                                 np.empty(e, np.float32), np.empty(n, np.float32)), step=step)
        assert placed.equals(g)
        assert not np.array_equal(other_chain.sample(42, step=step).node_ids, g.node_ids)


def test_a_step_must_be_a_non_negative_integer():
    sampler = _sampler({**SMALL[1], "kappa": 4})
    for bad in (-1, 2**63, 1.5, True):
        with pytest.raises(InvalidArgument, match="step"):
            sampler.sample(1, step=bad)


def test_each_slot_switches_once_per_period_one_kappa_th_of_them_per_step():
    kappa, slots = 8, 4000
    seeds = np.empty((3 * kappa + 1, slots), dtype=np.uint64)
    for t in range(seeds.shape[0]):  # from the start of period 1
        seeds[t] = [slot_seed(np.uint64(123), np.uint64(j), np.uint64(kappa + t), np.uint64(kappa))
                    for j in range(slots)]
    changed = seeds[1:] != seeds[:-1]
    assert np.all(np.abs(changed.mean(axis=1) - 1 / kappa) < 0.03)
    # Over one period each slot changes exactly once, and the next period starts where the last one ended.
    assert np.array_equal(changed[:kappa].sum(axis=0), np.ones(slots))
    assert not np.any(seeds[kappa][:, None] == seeds[0][None, :100])


def _inclusion(cfg: dict, kappa: int, draws: int, graph) -> tuple[np.ndarray, np.ndarray]:
    """How often each node and each edge (CSR position) is in a subgraph: independent seeds at kappa=1,
    independent chains at steps all over their periods for kappa > 1."""
    indptr, indices = graph
    node_counts = np.zeros(indptr.size - 1)
    edge_counts = np.zeros(indices.size)
    samplers = {0: _sampler(cfg, graph)}
    for i in range(draws):
        if kappa == 1:
            g, eids = samplers[0].sample_arrays(i)
        else:
            chain = i % 64  # 64 chains, each drawn at draws / 64 steps spread over many periods
            if chain not in samplers:
                samplers[chain] = _sampler({**cfg, "kappa": kappa}, graph, chain=chain_key(1, chain))
            g, eids = samplers[chain].sample_arrays(i, step=(i // 64) * (kappa + 3))
        node_counts[g.node_ids] += 1
        edge_counts[eids] += 1
    return node_counts / draws, edge_counts / draws


def _max_z(p: np.ndarray, q: np.ndarray, draws: int) -> float:
    pooled = (p + q) / 2
    se = np.sqrt(np.maximum(pooled * (1 - pooled), 1e-12) * 2 / draws)
    return float(np.max(np.abs(p - q) / se))


TINY = [
    {"kind": "frontier", "frontier_size": 8, "node_budget": 40, "clip_multiple": 4},
    {"kind": "random_walk", "roots": 12, "walk_length": 3, "clip_multiple": 4},
    {"kind": "edge", "edge_budget": 20, "clip_multiple": 4},
    {"kind": "node", "node_budget": 30, "clip_multiple": 4},
]


@pytest.mark.parametrize("cfg", TINY, ids=[c["kind"] for c in TINY])
def test_node_and_edge_inclusion_frequencies_are_those_of_independent_draws(cfg):
    graph = skewed_graph(120, 5.0, seed=11)
    draws = 6000
    nodes_1, edges_1 = _inclusion(cfg, 1, draws, graph)
    nodes_k, edges_k = _inclusion(cfg, 16, draws, graph)
    # 5 standard errors over ~120 nodes and ~600 positions: a false alarm is below 1e-3.
    assert _max_z(nodes_1, nodes_k, draws) < 5.0
    assert _max_z(edges_1, edges_k, draws) < 5.0
    # Power: a slightly larger budget is a different law, and the same statistic sees it.
    key = next(k for k in cfg if k.endswith(("budget", "roots")) and k != "frontier_size")
    bigger, _ = _inclusion({**cfg, key: int(cfg[key] * 1.25)}, 16, draws, graph)
    assert _max_z(nodes_1, bigger, draws) > 6.0


def test_kappa_is_validated_and_left_out_of_the_normalization_key():
    for kind in ("frontier", "random_walk", "edge", "node"):
        for bad in (0, -3, 2**20 + 1, "many", 2.5):
            with pytest.raises(InvalidArgument, match=rf"{kind}\.kappa"):
                parse_sampler_config({"kind": kind, "kappa": bad})
    cls_of = {"frontier": FrontierConfig, "random_walk": RandomWalkConfig, "edge": EdgeConfig, "node": NodeConfig}
    for kind, cls in cls_of.items():
        assert parse_sampler_config({"kind": kind, "kappa": 64}).kappa == 64
        assert cls().kappa == 1
        assert config_key(cls(kappa=64)) == config_key(cls())
    # The key of the demo's sampler is the one normalizations were stored under before kappa existed.
    assert config_key(RandomWalkConfig(roots=1000, walk_length=2, kappa=4)) == "random_walk-c0f88af88971fb86"


def test_interleaved_chains_in_one_fifo_raise_an_lru_cache_hit_rate():
    """Two workers' chains interleaved as a pool hands them to one trainer, through the trainer's cache."""
    indptr, indices = skewed_graph(20_000, 8.0, seed=2)
    cfg = {"kind": "random_walk", "roots": 300, "walk_length": 2}

    def hit_rate(kappa: int) -> float:
        workers = [_sampler({**cfg, "kappa": kappa}, (indptr, indices), chain=chain_key(3, w)) for w in range(2)]
        cache = FeatureCache(indptr.size - 1, 4, lru_rows=4000, name="kappa-test")
        for t in range(60):
            for w, sampler in enumerate(workers):
                ids = sampler.sample(t * 2 + w, step=t).node_ids
                out = np.empty((ids.size, 4), np.float32)
                hit = cache.lookup(ids, out)
                cache.insert(ids[~hit], np.zeros((int((~hit).sum()), 4), np.float32))
        return cache.stats()["cache_hit_rate"]

    independent, dependent = hit_rate(1), hit_rate(16)
    assert independent < 0.5  # the hubs of a skewed graph are hits anyway
    assert dependent > independent + 0.4
