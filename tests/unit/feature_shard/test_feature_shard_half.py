"""The float16 kernels agree bit for bit with numpy's casts (NaNs: stay NaN).

Both paths are checked whatever this CPU has: the kernels the public
functions run (conversion instructions where the CPU has them) and the
portable bit-pattern conversions (``narrow``/``widen`` below).
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from saintpipe.services.feature_shard import half
from saintpipe.services.feature_shard.half import gather_float16_rows, scatter_float16_rows


@njit
def _portable_narrow(values: np.ndarray, out: np.ndarray) -> None:
    for i in range(values.size):
        out[i] = half._float_bits_to_half_bits(values[i])


@njit
def _portable_widen(values: np.ndarray, out: np.ndarray) -> None:
    for i in range(values.size):
        out[i] = half._half_bits_to_float_bits(values[i])


def _narrow_portable(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values, dtype=np.float32)
    out = np.empty(values.shape, np.float16)
    _portable_narrow(values.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
    return out


def _narrow_gathered(values: np.ndarray) -> np.ndarray:
    """``values.astype(np.float16)`` through the public gather, row by row (each value a row of one)."""
    rows = np.ascontiguousarray(values, dtype=np.float32).reshape(-1, 1)
    out = np.empty(rows.shape, np.float16)
    gather_float16_rows(rows, np.arange(rows.shape[0]), out)
    return out.reshape(np.shape(values))


def _widen_scattered(halves: np.ndarray) -> np.ndarray:
    halves = halves.reshape(256, -1)
    out = np.full(halves.shape, -1.0, dtype=np.float32)
    order = np.random.default_rng(0).permutation(halves.shape[0])
    scatter_float16_rows(halves, order, out)
    return out[order].reshape(-1)


def _widen_portable(halves: np.ndarray) -> np.ndarray:
    out = np.empty(halves.shape, np.uint32)
    _portable_widen(halves.view(np.uint16), out)
    return out.view(np.float32)


NARROW = {"selected": _narrow_gathered, "portable": _narrow_portable}
WIDEN = {"selected": _widen_scattered, "portable": _widen_portable}


def test_the_selected_path_matches_this_cpu():
    import platform

    if platform.machine() == "x86_64":
        import llvmlite.binding as llvm
        from numba.core import config

        if not config.CPU_NAME:
            assert half.HARDWARE == bool(llvm.get_host_cpu_features().get("f16c"))
    assert (half._narrow is half._narrow_by_instruction) == half.HARDWARE


@pytest.mark.parametrize("path", sorted(WIDEN))
def test_every_float16_widens_exactly(path):
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    got = WIDEN[path](halves)
    nan = np.isnan(halves)
    assert np.isnan(got[nan]).all()  # a conversion instruction may quiet a signalling NaN
    np.testing.assert_array_equal(got[~nan].view(np.uint32), halves[~nan].astype(np.float32).view(np.uint32))


def _assert_narrows_like_numpy(values: np.ndarray, path: str = "selected") -> None:
    with np.errstate(all="ignore"):
        expected = values.astype(np.float16)
    got = NARROW[path](values)
    nan = np.isnan(values)
    assert np.isnan(got[nan]).all()
    np.testing.assert_array_equal(got[~nan].view(np.uint16), expected[~nan].view(np.uint16))


@pytest.mark.parametrize("path", sorted(NARROW))
def test_random_bit_patterns_narrow_like_numpy(path):
    bits = np.random.default_rng(1).integers(0, 2**32, 2_000_000, dtype=np.uint64).astype(np.uint32)
    _assert_narrows_like_numpy(bits.view(np.float32), path)


@pytest.mark.parametrize("path", sorted(NARROW))
def test_rounding_boundaries_subnormals_and_overflow_narrow_like_numpy(path):
    # Every finite float16, widened, and float32 patterns around the rounding points between them.
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    exact = halves[np.isfinite(halves)].astype(np.float32).view(np.uint32).astype(np.int64)
    offsets = (-2, -1, 0, 1, 2, 0x7FF, 0x800, 0x801, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000)
    patterns = (np.concatenate([exact + d for d in offsets]) % 2**32).astype(np.uint32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e-8, -6e-8, 3e38], np.float32)
    _assert_narrows_like_numpy(np.concatenate([patterns.view(np.float32), specials]), path)


def test_two_dimensional_and_empty():
    rows = np.random.default_rng(2).standard_normal((7, 5)).astype(np.float32)
    np.testing.assert_array_equal(_narrow_gathered(rows), rows.astype(np.float16))
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
