"""The float16 kernels agree bit for bit with numpy's casts (NaNs: stay NaN)."""

from __future__ import annotations

import numpy as np

from saintpipe.services.feature_shard.half import float32_to_float16, gather_float16_rows, scatter_float16_rows


def test_every_float16_widens_exactly():
    halves = np.arange(65536, dtype=np.uint16).view(np.float16).reshape(256, 256)
    out = np.full((256, 256), -1.0, dtype=np.float32)
    order = np.random.default_rng(0).permutation(256)
    scatter_float16_rows(halves, order, out)
    np.testing.assert_array_equal(out[order].view(np.uint32), halves.astype(np.float32).view(np.uint32))


def _assert_narrows_like_numpy(values: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        expected = values.astype(np.float16)
    got = float32_to_float16(values)
    nan = np.isnan(values)
    assert np.isnan(got[nan]).all()
    np.testing.assert_array_equal(got[~nan].view(np.uint16), expected[~nan].view(np.uint16))


def test_random_bit_patterns_narrow_like_numpy():
    bits = np.random.default_rng(1).integers(0, 2**32, 2_000_000, dtype=np.uint64).astype(np.uint32)
    _assert_narrows_like_numpy(bits.view(np.float32))


def test_rounding_boundaries_subnormals_and_overflow_narrow_like_numpy():
    # Every finite float16, widened, and float32 patterns around the rounding points between them.
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    exact = halves[np.isfinite(halves)].astype(np.float32).view(np.uint32).astype(np.int64)
    offsets = (-2, -1, 0, 1, 2, 0x7FF, 0x800, 0x801, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000)
    patterns = (np.concatenate([exact + d for d in offsets]) % 2**32).astype(np.uint32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e-8, -6e-8, 3e38], np.float32)
    _assert_narrows_like_numpy(np.concatenate([patterns.view(np.float32), specials]))


def test_two_dimensional_and_empty():
    rows = np.random.default_rng(2).standard_normal((7, 5)).astype(np.float32)
    np.testing.assert_array_equal(float32_to_float16(rows), rows.astype(np.float16))
    out = np.zeros((3, 5), np.float32)
    scatter_float16_rows(np.empty((0, 5), np.float16), np.empty(0, np.int64), out)
    assert not out.any()


def test_gather_narrows_rows_like_numpy():
    bits = np.random.default_rng(3).integers(0, 2**32, (300, 40), dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    values[0, :4] = [np.inf, -0.0, 65520.0, 1e-8]
    rows = np.array([5, 0, 299, 5, 17])
    out = np.full((5, 40), 7, dtype=np.float16)
    gather_float16_rows(values, rows, out)
    with np.errstate(all="ignore"):
        expected = values[rows].astype(np.float16)
    nan = np.isnan(expected)
    assert np.isnan(out[nan]).all()
    np.testing.assert_array_equal(out[~nan].view(np.uint16), expected[~nan].view(np.uint16))
    gather_float16_rows(values, np.empty(0, np.int64), out[:0])  # empty: nothing to do
