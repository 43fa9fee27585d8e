"""The demo generator: a valid graph whose labels can be learned from the graph and the features."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.services.dataset import checks
from saintpipe.services.dataset.demo import generate_demo


@pytest.fixture(scope="module")
def demo():
    return generate_demo(num_nodes=6000, seed=1)


def test_demo_is_a_valid_dataset(demo):
    n = checks.check_topology(demo["indptr"], demo["indices"], symmetric=True)
    assert n == 6000
    checks.check_features(demo["features"], n)
    assert checks.check_labels(demo["labels"], n) == (8, False)
    checks.check_splits(demo["splits"], demo["labels"], n)
    assert demo["indices"].size / n == pytest.approx(12, rel=0.1)


def test_neighbour_majority_vote_beats_chance_by_far(demo):
    indptr, indices, labels = demo["indptr"], demo["indices"], demo["labels"]
    rows = np.repeat(np.arange(labels.size), np.diff(indptr))
    votes = np.zeros((labels.size, 8), dtype=np.int64)
    np.add.at(votes, (rows, labels[indices]), 1)
    has = np.diff(indptr) > 0
    accuracy = (votes.argmax(1) == labels)[has].mean()
    assert accuracy > 0.8  # chance is 1/8


def test_features_carry_a_noisy_class_signal(demo):
    x, y = demo["features"], demo["labels"]
    centroids = np.stack([x[y == c].mean(0) for c in range(8)])
    nearest = ((x[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
    accuracy = (nearest == y).mean()
    assert 0.25 < accuracy < 0.99  # informative but noisy: the graph must help
