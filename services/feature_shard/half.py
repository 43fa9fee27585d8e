"""float32 <-> float16 conversion kernels for the float16 transfer.

numpy's ``astype`` between float32 and float16 runs a scalar loop: on the
development machine it converted 4 MB of float32 in 11 ms, twenty times slower
than copying them, which made the half-size transfer slower than the full one.
These Numba kernels do the same IEEE conversion on the bit patterns (the
algorithm of numpy's ``npy_floatbits_to_halfbits`` / ``npy_halfbits_to_floatbits``:
round to nearest, ties to even; overflow to infinity; subnormals kept; NaN
stays NaN) and give bit-identical results for every non-NaN value (tests check
them against numpy).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _float_bits_to_half_bits(f: np.uint32) -> np.uint16:
    sign = (f & 0x80000000) >> 16
    exp = f & 0x7F800000
    if exp >= 0x47800000:  # overflow, infinity or NaN
        if exp == 0x7F800000 and (f & 0x007FFFFF) != 0:
            nan = 0x7C00 + ((f & 0x007FFFFF) >> 13)
            return np.uint16(sign + (nan if nan != 0x7C00 else 0x7C01))
        return np.uint16(sign + 0x7C00)
    if exp <= 0x38000000:  # zero or a float16 subnormal
        if exp < 0x33000000:
            return np.uint16(sign)
        e = exp >> 23
        sig = 0x00800000 + (f & 0x007FFFFF)
        sig >>= 113 - e
        if (sig & 0x00003FFF) != 0x00001000 or (f & 0x000007FF) != 0:
            sig += 0x00001000
        return np.uint16(sign + (sig >> 13))
    half_exp = (exp - 0x38000000) >> 13
    sig = f & 0x007FFFFF
    if (sig & 0x00003FFF) != 0x00001000:
        sig += 0x00001000
    # A carry out of the significand bumps the exponent (up to infinity): the right answer.
    return np.uint16(sign + half_exp + (sig >> 13))


@njit(cache=True, inline="always")
def _half_bits_to_float_bits(h: np.uint16) -> np.uint32:
    h = np.uint32(h)
    sign = (h & 0x8000) << 16
    exp = h & 0x7C00
    if exp == 0:
        sig = h & 0x03FF
        if sig == 0:
            return np.uint32(sign)
        sig <<= 1
        shift = 0
        while (sig & 0x0400) == 0:
            sig <<= 1
            shift += 1
        return np.uint32(sign + ((127 - 15 - shift) << 23) + ((sig & 0x03FF) << 13))
    if exp == 0x7C00:
        return np.uint32(sign + 0x7F800000 + ((h & 0x03FF) << 13))
    return np.uint32(sign + (((h & 0x7FFF) + 0x1C000) << 13))


@njit(cache=True, nogil=True)  # releases the GIL: the client converts every shard's rows at once
def _to_half_bits(src: np.ndarray, out: np.ndarray) -> None:
    for i in range(src.size):
        out[i] = _float_bits_to_half_bits(src[i])


@njit(cache=True, nogil=True)  # releases the GIL: the client converts every shard's rows at once
def _gather_half_rows(src: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    dim = src.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        for j in range(dim):
            out[i, j] = _float_bits_to_half_bits(src[r, j])


@njit(cache=True, nogil=True)  # releases the GIL: the client converts every shard's rows at once
def _scatter_half_rows(src: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    dim = src.shape[1]
    for i in range(src.shape[0]):
        r = rows[i]
        for j in range(dim):
            out[r, j] = _half_bits_to_float_bits(src[i, j])


@njit(cache=True, nogil=True)  # releases the GIL: the client converts every shard's rows at once
def _copy_half_rows(src: np.ndarray, src_rows: np.ndarray, out: np.ndarray, out_rows: np.ndarray) -> None:
    dim = src.shape[1]
    for i in range(src_rows.shape[0]):
        s = src_rows[i]
        o = out_rows[i]
        for j in range(dim):
            out[o, j] = _half_bits_to_float_bits(src[s, j])


def float32_to_float16(values: np.ndarray) -> np.ndarray:
    """``values.astype(np.float16)`` for a C-contiguous float32 array, fast."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    out = np.empty(values.shape, dtype=np.float16)
    _to_half_bits(values.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
    return out


def gather_float16_rows(values: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """``out[:] = values[rows].astype(np.float16)`` without the float32 intermediate, fast.

    ``values`` is C-contiguous float32 [n, dim] (a memory map is fine), ``rows``
    integer indices into it (not checked: the caller checked the range), ``out``
    a float16 [len(rows), dim] array with C-contiguous rows.
    """
    if len(rows) == 0:
        return
    _gather_half_rows(
        np.ascontiguousarray(values, dtype=np.float32).view(np.uint32),
        np.ascontiguousarray(rows, dtype=np.int64),
        out.view(np.uint16),
    )


def scatter_float16_rows(rows: np.ndarray, positions: np.ndarray, out: np.ndarray) -> None:
    """``out[positions] = rows.astype(np.float32)`` for float16 ``rows`` [n, dim] and float32 ``out``, fast.

    ``out`` must be C-contiguous float32 with ``out.shape[1] == rows.shape[1]``.
    """
    if rows.shape[0] == 0:
        return
    bits = np.ascontiguousarray(rows).view(np.uint16)
    _scatter_half_rows(bits, np.ascontiguousarray(positions, dtype=np.int64), out.view(np.uint32))


def copy_float16_rows(src: np.ndarray, src_rows: np.ndarray, out: np.ndarray, out_rows: np.ndarray) -> None:
    """``out[out_rows] = src[src_rows].astype(np.float32)`` for float16 ``src`` and float32 ``out``, in one pass.

    ``src`` [m, dim] needs C-contiguous rows (a view of a shared-memory region is
    fine); ``out`` is C-contiguous float32 with the same width; the index arrays
    have equal length and are not checked.
    """
    if len(src_rows) == 0:
        return
    _copy_half_rows(
        src.view(np.uint16),
        np.ascontiguousarray(src_rows, dtype=np.int64),
        out.view(np.uint32),
        np.ascontiguousarray(out_rows, dtype=np.int64),
    )
