"""The frontier's sum tree (kernels/sumtree.py) against prefix sums, through builds, updates and zero weights."""

import numpy as np
import pytest

from saintpipe.services.sampler.kernels.sumtree import add, build, find, top_bit


@pytest.mark.parametrize("m", [1, 2, 3, 7, 8, 9, 1000, 1023, 1024, 1025])
def test_find_returns_the_slot_whose_prefix_range_holds_x(m):
    rng = np.random.default_rng(m)
    weights = rng.integers(0, 5, m).astype(np.int64)  # zeros included: they own no range
    tree = np.empty(m + 1, dtype=np.int64)
    assert build(weights, m, tree) == weights.sum()
    top = top_bit(m)
    assert top <= m < 2 * top
    checked = 0
    for _ in range(60):
        slot = int(rng.integers(0, m))
        delta = int(rng.integers(0, 9)) - int(weights[slot])
        add(tree, m, slot, delta)
        weights[slot] += delta
        total = int(weights.sum())
        if total == 0:
            continue
        prefix = np.cumsum(weights)
        xs = np.concatenate([rng.integers(0, total, 20), [0, total - 1], prefix[prefix < total]])
        for x in xs:
            j = find(tree, m, top, np.int64(x))
            assert j == np.searchsorted(prefix, x, side="right"), (m, int(x))
            assert weights[j] > 0
            checked += 1
    assert checked > 0


def test_draws_follow_the_weights():
    weights = np.array([0, 1, 0, 3, 6], dtype=np.int64)
    tree = np.empty(6, dtype=np.int64)
    total = build(weights, 5, tree)
    hits = np.bincount([find(tree, 5, top_bit(5), np.int64(x)) for x in range(total)], minlength=5)
    assert hits.tolist() == weights.tolist()
