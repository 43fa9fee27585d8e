"""Received rows land where numpy's fancy assignment would put them."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.services.feature_shard.scatter import scatter_rows


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_scatter_rows_is_fancy_assignment(dtype):
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((37, 11)).astype(dtype)
    positions = rng.permutation(50)[:37]
    out = np.zeros((50, 11), dtype)
    expected = out.copy()
    expected[positions] = rows
    scatter_rows(rows, positions, out)
    np.testing.assert_array_equal(out, expected)


def test_scatter_rows_takes_a_strided_chunk_and_nothing():
    rows = np.arange(24, dtype=np.float32).reshape(6, 4)[::2]  # not contiguous: copied first
    out = np.full((5, 4), -1, np.float32)
    scatter_rows(rows, np.array([4, 0, 2]), out)
    np.testing.assert_array_equal(out[[4, 0, 2]], rows)
    assert (out[[1, 3]] == -1).all()
    scatter_rows(np.empty((0, 4), np.float32), np.empty(0, np.int64), out)
