"""The smoothed estimator (counts shrunk toward the prior) and build_normalization's four methods (issue 21)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sampler_graphs import random_graph
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.config import EdgeConfig, FrontierConfig, NodeConfig, RandomWalkConfig, config_key
from saintpipe.services.sampler.inclusion import inclusion_probabilities
from saintpipe.services.sampler.normalization import (
    DEFAULT_STRENGTH,
    build_normalization,
    closed_form_coefficients,
    coefficients_from_counts,
    count_samples,
    estimate_normalization,
    smoothed_coefficients,
)

INDPTR, INDICES = random_graph(80, 200, seed=3, isolated=4)
ROWS = np.repeat(np.arange(80), np.diff(INDPTR))
TRAIN = np.arange(0, 80, 3)
WALK = RandomWalkConfig(roots=4, walk_length=2, clip_multiple=None)


def test_zero_counts_give_the_prior_exactly():
    p0, alpha0 = inclusion_probabilities(WALK, INDPTR, INDICES)
    loss, alpha = smoothed_coefficients(INDPTR, None, None, 0, p0, alpha0, TRAIN)
    zeros = smoothed_coefficients(INDPTR, np.zeros(80, np.int64), np.zeros(INDICES.size, np.int32), 0, p0, alpha0,
                                  TRAIN, strength=7.0)
    assert np.array_equal(alpha, alpha0) and np.array_equal(zeros[1], alpha0)
    expected = np.zeros(80, dtype=np.float32)
    expected[TRAIN] = (1 / (p0[TRAIN] * TRAIN.size)).astype(np.float32)
    expected[p0 == 0] = 0  # isolated training nodes can never be drawn
    assert np.array_equal(loss, expected) and np.array_equal(zeros[0], expected)
    assert np.array_equal(loss, closed_form_coefficients(INDPTR, INDICES, WALK, TRAIN)[0])


def test_converges_to_the_count_estimate():
    """The distance to the counts' own ratios is at most m / (n + m), and shrinks as the counts grow."""
    p0, alpha0 = inclusion_probabilities(WALK, INDPTR, INDICES)
    m = DEFAULT_STRENGTH
    gaps = []
    for num in (30, 300, 3000):
        nodes, edges = count_samples(INDPTR, INDICES, WALK, num_subgraphs=num, processes=1)
        loss, alpha = smoothed_coefficients(INDPTR, nodes, edges, num, p0, alpha0, None, m)
        p = np.where(loss > 0, 1 / (loss.astype(np.float64) * 80), 0)
        assert np.all(np.abs(p - nodes / num) <= m / (num + m) + 1e-6)
        seen = nodes[ROWS] > 0
        ratio = edges[seen] / nodes[ROWS][seen]
        assert np.all(np.abs(alpha[seen] - ratio) <= m / (nodes[ROWS][seen] + m) + 1e-6)
        ref_loss, ref_alpha = coefficients_from_counts(INDPTR, nodes, edges, num)
        both = (edges > 0) & seen
        gaps.append(max(np.max(np.abs(alpha[both] / ref_alpha[both] - 1)),
                        np.max(np.abs(loss[nodes > 0] / ref_loss[nodes > 0] - 1))))
        assert np.all((alpha > 0) & (alpha <= 1)) and np.all(np.isfinite(loss))
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.05


def test_writes_in_place_and_checks_its_outputs():
    p0, alpha0 = inclusion_probabilities(WALK, INDPTR, INDICES)
    nodes, edges = count_samples(INDPTR, INDICES, WALK, num_subgraphs=20, processes=1)
    fresh = smoothed_coefficients(INDPTR, nodes, edges, 20, p0, alpha0, TRAIN)
    loss_out, alpha_out = np.full(80, -1, np.float32), np.full(INDICES.size, -1, np.float32)
    got = smoothed_coefficients(INDPTR, nodes, edges, 20, p0, alpha0, TRAIN, loss_out=loss_out, alpha_out=alpha_out)
    assert got[0] is loss_out and got[1] is alpha_out
    assert np.array_equal(loss_out, fresh[0]) and np.array_equal(alpha_out, fresh[1])
    with pytest.raises(InvalidArgument, match="loss_out"):
        smoothed_coefficients(INDPTR, nodes, edges, 20, p0, alpha0, loss_out=np.zeros(80))
    with pytest.raises(InvalidArgument, match="alpha_out"):
        smoothed_coefficients(INDPTR, nodes, edges, 20, p0, alpha0, alpha_out=np.zeros(3, np.float32))
    with pytest.raises(InvalidArgument, match="strength"):
        smoothed_coefficients(INDPTR, nodes, edges, 20, p0, alpha0, strength=0.0)
    with pytest.raises(InvalidArgument, match="counts"):
        smoothed_coefficients(INDPTR, nodes[:5], edges, 20, p0, alpha0)
    with pytest.raises(InvalidArgument, match="train_nodes"):
        smoothed_coefficients(INDPTR, nodes, edges, 20, p0, alpha0, np.array([80]))


def test_readers_never_see_a_provisional_value():
    """Online mode: samplers read the arrays while they are recomputed; every value read must be the old
    or the new one (the kernel releases the GIL, so the reader runs during the writes)."""
    indptr, indices = random_graph(20_000, 200_000, seed=4)
    rng = np.random.default_rng(0)
    rows = np.repeat(np.arange(20_000), np.diff(indptr))
    p0, alpha0 = inclusion_probabilities(WALK, indptr, indices)
    states = []
    for num in (20, 60):
        nodes = rng.integers(0, num, 20_000)
        states.append((nodes, np.minimum(nodes[rows], rng.integers(0, num, indices.size)), num))
    results = [smoothed_coefficients(indptr, c, e, n, p0, alpha0) for c, e, n in states]
    loss, alpha = results[0][0].copy(), results[0][1].copy()
    assert np.count_nonzero(results[0][1] != results[1][1]) > indices.size // 2
    done = threading.Event()
    reads, bad = [], []

    def read():
        while not done.is_set():
            seen_loss, seen_alpha = loss.copy(), alpha.copy()
            reads.append(1)
            if not (np.all((seen_loss == results[0][0]) | (seen_loss == results[1][0]))
                    and np.all((seen_alpha == results[0][1]) | (seen_alpha == results[1][1]))):
                bad.append(1)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(60):
        c, e, n = states[(i + 1) % 2]
        smoothed_coefficients(indptr, c, e, n, p0, alpha0, loss_out=loss, alpha_out=alpha)
    done.set()
    reader.join()
    assert reads and not bad


def test_build_normalization_methods():
    node = NodeConfig(node_budget=30, clip_multiple=None)
    exact = build_normalization(INDPTR, INDICES, node, method="exact", train_nodes=TRAIN)
    loss, alpha = closed_form_coefficients(INDPTR, INDICES, node, TRAIN)
    assert exact.method == "exact" and exact.num_subgraphs == 0 and exact.config_key == config_key(node)
    assert np.array_equal(exact.loss_coefficients, loss) and np.array_equal(exact.aggregator_coefficients, alpha)
    assert build_normalization(INDPTR, INDICES, EdgeConfig(edge_budget=20), method="exact").method == "exact"
    for config in (WALK, FrontierConfig(frontier_size=4, node_budget=20)):
        with pytest.raises(InvalidArgument, match=f"no closed form for {config.kind}"):
            build_normalization(INDPTR, INDICES, config, method="exact")
        prior = build_normalization(INDPTR, INDICES, config, method="prior")
        assert prior.method == "prior"
        assert np.array_equal(prior.aggregator_coefficients, closed_form_coefficients(INDPTR, INDICES, config)[1])
    smoothed = build_normalization(INDPTR, INDICES, WALK, method="smoothed", train_nodes=TRAIN, num_subgraphs=40,
                                   seed=2, processes=1, strength=5.0)
    nodes, edges = count_samples(INDPTR, INDICES, WALK, num_subgraphs=40, seed=2, processes=1)
    p0, alpha0 = inclusion_probabilities(WALK, INDPTR, INDICES)
    expected = smoothed_coefficients(INDPTR, nodes, edges, 40, p0, alpha0, TRAIN, 5.0)
    assert (smoothed.method, smoothed.num_subgraphs, smoothed.seed, smoothed.strength) == ("smoothed", 40, 2, 5.0)
    assert np.array_equal(smoothed.loss_coefficients, expected[0])
    assert np.array_equal(smoothed.aggregator_coefficients, expected[1])
    reference = build_normalization(INDPTR, INDICES, WALK, method="reference", num_subgraphs=40, processes=1)
    direct = estimate_normalization(INDPTR, INDICES, WALK, num_subgraphs=40, processes=1)
    assert reference.method == "reference"
    assert np.array_equal(reference.aggregator_coefficients, direct.aggregator_coefficients)
    with pytest.raises(InvalidArgument, match="unknown normalization method 'counts'"):
        build_normalization(INDPTR, INDICES, WALK, method="counts")
