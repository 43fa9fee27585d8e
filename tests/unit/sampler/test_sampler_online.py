"""Online normalization: a sampler starts on the prior, counts what it produces, and refines in place."""

from __future__ import annotations

import numpy as np
import pytest

from sampler_graphs import random_graph
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import FrontierConfig, RandomWalkConfig
from saintpipe.services.sampler.inclusion import inclusion_probabilities
from saintpipe.services.sampler.normalization import closed_form_coefficients, smoothed_coefficients
from saintpipe.services.sampler.online import OnlineNormalization
from saintpipe.services.sampler.sampler import make_sampler

INDPTR, INDICES = random_graph(90, 260, seed=5, isolated=3)
TRAIN = np.arange(0, 90, 3)
STRENGTH = 4.0


def _online_sampler(config):
    loss, alpha = closed_form_coefficients(INDPTR, INDICES, config, TRAIN)
    norm = Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, method="online", strength=STRENGTH)
    return make_sampler(config, INDPTR, INDICES, normalization=norm, train_nodes=TRAIN), loss, alpha


@pytest.mark.parametrize("config", [RandomWalkConfig(roots=6, walk_length=2, clip_multiple=None),
                                    FrontierConfig(frontier_size=5, node_budget=20, clip_multiple=None)])
def test_the_first_subgraph_carries_the_prior_and_later_ones_the_counts(config):
    sampler, prior_loss, prior_alpha = _online_sampler(config)
    prior = make_sampler(config, INDPTR, INDICES, train_nodes=TRAIN, normalization=Normalization(
        loss_coefficients=prior_loss, aggregator_coefficients=prior_alpha, method="prior"))
    first, _ = sampler.sample_arrays(11)
    assert first.equals(prior.sample_arrays(11)[0])  # weighted before it was counted

    node_counts = np.zeros(INDPTR.size - 1, dtype=np.int64)
    edge_counts = np.zeros(INDICES.size, dtype=np.int64)
    node_counts[first.node_ids] += 1
    for seed in range(12, 12 + 300):
        g, eids = sampler.sample_arrays(seed)
        node_counts[g.node_ids] += 1
        edge_counts[eids] += 1
    online = sampler.online
    assert online.subgraphs == 301
    np.testing.assert_array_equal(online.node_counts, node_counts)
    assert online.edge_counts.sum() == edge_counts.sum() + first.num_edges
    assert online.refreshes >= 8  # after 1, 2, 4, ..., 256 subgraphs at least

    # In place: the sampler's views show what the last refresh computed from the counts up to then.
    online.refresh()
    prior_p, prior_a = inclusion_probabilities(config, INDPTR, INDICES)
    want_loss, want_alpha = smoothed_coefficients(INDPTR, online.node_counts, online.edge_counts, online.subgraphs,
                                                  online.prior_p, prior_alpha, train_nodes=TRAIN, strength=STRENGTH)
    np.testing.assert_allclose(online.alpha, want_alpha, rtol=1e-6)
    np.testing.assert_allclose(online.loss, want_loss, rtol=1e-5)
    assert not np.array_equal(online.alpha, prior_alpha)  # the counts moved it
    g = sampler.sample(999)
    rows = np.repeat(g.node_ids, np.diff(g.indptr))
    cols = g.node_ids[g.indices]
    deg = np.diff(INDPTR)
    positions = np.array([INDPTR[r] + np.searchsorted(INDICES[INDPTR[r]:INDPTR[r + 1]], c)
                          for r, c in zip(rows, cols)], dtype=np.int64)
    np.testing.assert_allclose(g.edge_weights, 1.0 / (deg[rows] * want_alpha[positions]), rtol=1e-5)
    # The prior's node probabilities come back from its loss coefficients on the training nodes.
    np.testing.assert_allclose(online.prior_p[TRAIN], prior_p[TRAIN], rtol=1e-5)


def test_refreshes_double_then_keep_a_fixed_interval():
    loss, alpha = closed_form_coefficients(INDPTR, INDICES, RandomWalkConfig(roots=3), TRAIN)
    online = OnlineNormalization(INDPTR, loss, alpha, np.zeros(0, np.uint8), STRENGTH, max_interval=8)
    refreshed = [i + 1 for i in range(40)
                 if online.observe(np.array([1, 2], np.int64), np.array([0, 1], np.int64))]
    assert refreshed == [1, 2, 4, 8, 16, 24, 32, 40]
    assert online.node_counts[1] == 40 and online.edge_counts[0] == 40


def test_counting_stops_after_max_subgraphs_with_a_last_refresh():
    loss, alpha = closed_form_coefficients(INDPTR, INDICES, RandomWalkConfig(roots=3), TRAIN)
    online = OnlineNormalization(INDPTR, loss, alpha, np.zeros(0, np.uint8), STRENGTH, max_subgraphs=6)
    nodes, eids = np.array([1, 2], np.int64), np.array([0, 1], np.int64)
    refreshed = [i + 1 for i in range(10) if online.observe(nodes, eids)]
    assert refreshed == [1, 2, 4, 6] and online.converged
    assert online.subgraphs == 6 and online.node_counts[1] == 6  # nothing counted after the sixth
    final = online.alpha.copy()
    online.observe(nodes, eids)
    np.testing.assert_array_equal(online.alpha, final)


def test_a_prior_that_does_not_fit_the_graph_is_refused():
    with pytest.raises(InvalidArgument, match="prior shapes"):
        OnlineNormalization(INDPTR, np.zeros(3, np.float32), np.zeros(INDICES.size, np.float32),
                            np.zeros(0, np.uint8), STRENGTH)
