"""Closed-form inclusion probabilities against Monte-Carlo counts of the real samplers (issue 21).

Every tolerance is ``Z`` binomial standard deviations of the Monte-Carlo
frequency; each test also checks that a plausible wrong formula is rejected
by the same tolerance, so agreement means something.
"""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.sampler import inclusion
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import EdgeConfig, FrontierConfig, NodeConfig, RandomWalkConfig
from saintpipe.services.sampler.inclusion import inclusion_probabilities, is_exact, pair_probability
from saintpipe.services.sampler.normalization import closed_form_coefficients, count_samples
from saintpipe.services.sampler.sampler import make_sampler


def _graph() -> tuple[np.ndarray, np.ndarray]:
    """60 nodes with skewed degrees (1 to 18), a self loop on node 7 and isolated nodes (45 and 59)."""
    rng = np.random.default_rng(5)
    weights = np.arange(1, 60) ** -0.8
    src, dst = rng.choice(59, 150, p=weights / weights.sum()), rng.integers(0, 59, 150)
    keep = src != dst
    return edges_to_csr(np.append(src[keep], 7), np.append(dst[keep], 7), 60, drop_self_loops=False)


INDPTR, INDICES = _graph()
DEG = np.diff(INDPTR)
ROWS = np.repeat(np.arange(DEG.size), DEG)
SELF_LOOP = int(np.flatnonzero((ROWS == 7) & (INDICES == 7))[0])
TRAIN = np.arange(0, 60, 2)
K = 20_000  # Monte-Carlo subgraphs
Z = 5.0  # standard deviations: ~500 comparisons per test, P(|N(0,1)| > 5) = 6e-7 each
NODE = NodeConfig(node_budget=20, clip_multiple=None, uniform_mix=0.0)
NODE_MIX = NodeConfig(node_budget=20, clip_multiple=None, uniform_mix=0.5)
EDGE = EdgeConfig(edge_budget=10, clip_multiple=None)


def _max_z(freq: np.ndarray, p: np.ndarray) -> float:
    """Largest deviation of frequencies from probabilities, in binomial standard deviations."""
    var = np.maximum(p * (1 - p), 1.0 / K) / K  # the floor keeps p = 0 or 1 from dividing by zero
    return float(np.max(np.abs(freq - p) / np.sqrt(var)))


def _textbook_pair(a, b, ab, draws):
    """p_uv by plain inclusion-exclusion (fine at this graph's probabilities)."""
    return 1 - (1 - a) ** draws - (1 - b) ** draws + (1 - a - b + ab) ** draws


@pytest.fixture(scope="module")
def counts():
    """``{kind: (C(v) / K, C(u, v) / K)}`` of K subgraphs of each sampler."""
    configs = (NODE, NODE_MIX, EDGE, RandomWalkConfig(roots=5, walk_length=2, clip_multiple=None),
               FrontierConfig(frontier_size=5, node_budget=20, clip_multiple=None))
    out = {}
    for config in configs:
        nodes, edges = count_samples(INDPTR, INDICES, config, num_subgraphs=K, seed=1, processes=1)
        out[config.kind + ("_mix" if getattr(config, "uniform_mix", 0) else "")] = nodes / K, edges / K
    return out


def _pairs(p: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return p[ROWS] * alpha.astype(np.float64)


def test_node_sampler_matches_monte_carlo(counts):
    freq, freq_pair = counts["node"]
    p, alpha = inclusion_probabilities(NODE, INDPTR, INDICES)
    q = DEG / DEG.sum()
    assert np.allclose(p, 1 - (1 - q) ** NODE.node_budget, rtol=1e-12, atol=0)
    expected = _textbook_pair(q[INDICES], q[ROWS], 0.0, NODE.node_budget)
    off = INDICES != ROWS
    assert np.allclose(_pairs(p, alpha)[off], expected[off], rtol=1e-6)
    assert _max_z(freq, p) < Z and _max_z(freq_pair, _pairs(p, alpha)) < Z
    assert _max_z(freq, np.minimum(1.0, NODE.node_budget * q)) > Z, "p = budget * q must be rejected"


def test_node_sampler_uniform_mix_matches_monte_carlo(counts):
    """The defensive mixture draws isolated nodes too, and its closed form still matches what is drawn."""
    freq, freq_pair = counts["node_mix"]
    p, alpha = inclusion_probabilities(NODE_MIX, INDPTR, INDICES)
    q = 0.5 * DEG / DEG.sum() + 0.5 / DEG.size
    assert np.allclose(p, 1 - (1 - q) ** NODE_MIX.node_budget, rtol=1e-12, atol=0)
    assert freq[45] > 0 and freq[59] > 0, "isolated nodes must be drawn under the mixture"
    assert _max_z(freq, p) < Z and _max_z(freq_pair, _pairs(p, alpha)) < Z
    plain, _ = inclusion_probabilities(NODE, INDPTR, INDICES)
    assert p.min() > plain[DEG > 0].min(), "the mixture must raise the smallest inclusion probability"
    assert _max_z(freq, plain) > Z, "the degree-only law must be rejected for the mixture's draws"


def test_edge_sampler_matches_monte_carlo(counts):
    freq, freq_pair = counts["edge"]
    p, alpha = inclusion_probabilities(EDGE, INDPTR, INDICES)
    w = 1.0 / DEG[ROWS] + 1.0 / DEG[INDICES]
    q = w / w.sum()
    row_sums = np.bincount(ROWS, weights=q, minlength=DEG.size)
    per_node = 2 * row_sums
    per_node[7] -= q[SELF_LOOP]  # the self loop's row and column are one node
    budget = EDGE.edge_budget
    assert np.allclose(p, 1 - (1 - per_node) ** budget, rtol=1e-9)
    expected = _textbook_pair(per_node[INDICES], per_node[ROWS], 2 * q, budget)
    off = INDICES != ROWS
    assert np.allclose(_pairs(p, alpha)[off], expected[off], rtol=1e-6)
    assert _max_z(freq, p) < Z and _max_z(freq_pair, _pairs(p, alpha)) < Z
    no_joint = _textbook_pair(per_node[INDICES], per_node[ROWS], 0.0, budget)  # forgets the edge's own draw
    no_joint[~off] = p[ROWS][~off]
    assert _max_z(freq_pair, no_joint) > Z, "the edge sampler's joint term ab = 0 must be rejected"
    assert _max_z(freq, 1 - (1 - row_sums) ** budget) > Z, "counting rows only must be rejected"


@pytest.mark.parametrize("config", [NODE, EDGE], ids=["node", "edge"])
def test_normalized_rows_and_loss_are_unbiased(config):
    """Sampled with the closed-form coefficients, each aggregation row sums to 1 in expectation given its
    node, and a subgraph's loss weights to the share of training nodes that can be drawn."""
    loss, alpha = closed_form_coefficients(INDPTR, INDICES, config, TRAIN)
    norm = Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, method="exact")
    sampler = make_sampler(config, INDPTR, INDICES, normalization=norm, train_nodes=TRAIN)
    num, total, squares = np.zeros(60), np.zeros(60), np.zeros(60)
    losses = []
    draws = 4000
    for seed in range(draws):
        g = sampler.sample(seed)
        rows = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr))
        sums = np.bincount(rows, weights=g.edge_weights, minlength=g.num_nodes)
        num[g.node_ids] += 1
        total[g.node_ids] += sums
        squares[g.node_ids] += sums ** 2
        losses.append(float(g.loss_weights.sum(dtype=np.float64)))
    seen = num >= 200
    seen &= DEG > 0
    mean = total[seen] / num[seen]
    sd = np.sqrt(np.maximum(squares[seen] / num[seen] - mean ** 2, 0))
    assert np.all(np.abs(mean - 1) <= Z * sd / np.sqrt(num[seen]) + 1e-4)
    assert seen.sum() > 30
    drawable = np.count_nonzero(DEG[TRAIN] > 0) / TRAIN.size
    assert abs(np.mean(losses) - drawable) <= Z * np.std(losses) / np.sqrt(draws)


@pytest.mark.parametrize("kind", ["random_walk", "frontier"])
def test_priors_are_close_to_monte_carlo(counts, kind):
    config = {"random_walk": RandomWalkConfig(roots=5, walk_length=2, clip_multiple=None),
              "frontier": FrontierConfig(frontier_size=5, node_budget=20, clip_multiple=None)}[kind]
    assert not is_exact(config)
    freq, freq_pair = counts[kind]
    p, alpha = inclusion_probabilities(config, INDPTR, INDICES)
    seen = freq > 0.01
    assert 0.5 < np.median(p[seen] / freq[seen]) < 2
    pairs = freq_pair > 0.01
    assert 0.5 < np.median(_pairs(p, alpha)[pairs] / freq_pair[pairs]) < 2
    assert np.all((alpha > 0) & (alpha <= 1)) and np.all((p >= 0) & (p <= 1))


def test_self_loops_isolated_nodes_and_bounds():
    assert is_exact(NODE) and is_exact(EDGE)
    for config in (NODE, EDGE):
        p, alpha = inclusion_probabilities(config, INDPTR, INDICES)
        assert alpha[SELF_LOOP] == 1.0
        assert p[45] == p[59] == 0.0, "isolated nodes are never drawn"
        assert np.all((alpha > 0) & (alpha <= 1))
        loss, _ = closed_form_coefficients(INDPTR, INDICES, config, np.array([45, 2]))
        assert loss[45] == 0 and loss[2] == pytest.approx(1 / (p[2] * 2), rel=1e-6)


def test_pair_probability_keeps_its_precision():
    tiny = 1e-12
    assert pair_probability(tiny, tiny, 0.0, 8000) == pytest.approx(8000 * 7999 * tiny * tiny, rel=1e-6)
    assert pair_probability(tiny, tiny, tiny * 0.5, 1) == pytest.approx(tiny * 0.5, rel=1e-6)
    assert pair_probability(0.3, 0.2, 0.0, 1) == pytest.approx(0.0, abs=1e-15)
    assert pair_probability(1.0, 0.2, 0.2, 3) == pytest.approx(1 - 0.8 ** 3, rel=1e-12)
    assert pair_probability(0.5, 0.5, 0.5, 2000) == 1.0  # (1 + c)^D overflows: the direct branch
    a, b, ab, draws = 0.2, 0.1, 0.05, 7
    assert pair_probability(a, b, ab, draws) == pytest.approx(_textbook_pair(a, b, ab, draws), rel=1e-12)


def test_threads_give_the_same_alpha(monkeypatch):
    one = inclusion_probabilities(EDGE, INDPTR, INDICES, threads=1)
    monkeypatch.setattr(inclusion, "_ROWS_PER_THREAD", 8)
    split = inclusion_probabilities(EDGE, INDPTR, INDICES, threads=3)
    assert np.array_equal(one[0], split[0]) and np.array_equal(one[1], split[1])


def test_edge_sampler_needs_an_edge():
    with pytest.raises(InvalidArgument, match="at least one edge"):
        inclusion_probabilities(EDGE, np.zeros(4, dtype=np.int64), np.zeros(0, dtype=np.int32))
    p, alpha = inclusion_probabilities(NODE, np.zeros(4, dtype=np.int64), np.zeros(0, dtype=np.int32))
    assert np.allclose(p, 1 - (2 / 3) ** NODE.node_budget) and alpha.size == 0
