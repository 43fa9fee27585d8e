"""float32 <-> float16 conversion kernels for the float16 transfer.

numpy's ``astype`` between float32 and float16 runs a scalar loop, far slower than copying the data,
which made the half-size transfer slower than the full one. These Numba kernels do the same IEEE
conversion (round to nearest, ties to even; overflow to infinity; subnormals kept; NaN stays NaN),
bit-identical for every non-NaN value (tests check them against numpy): through LLVM's casts where the CPU
has conversion instructions (x86 F16C, AArch64), else on the bit patterns, branch-free so that the loops
vectorize.
"""

from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


def _cpu_converts_half() -> bool:
    """Whether the CPU Numba compiles for has float16 conversion instructions (x86 F16C, every AArch64).

    LLVM lowers a float <-> half cast to them; without them it would call
    compiler-rt helpers that Numba's JIT does not link, so the bit-pattern
    kernels below are used instead. An explicit ``NUMBA_CPU_NAME`` (a portable
    cache) is trusted only as far as its ``NUMBA_CPU_FEATURES`` say.
    """
    from numba.core import config

    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return True
    if machine not in ("x86_64", "amd64"):
        return False
    # numba.config sets these from NUMBA_CPU_NAME / NUMBA_CPU_FEATURES at import (no annotations for them).
    if config.CPU_NAME:  # type: ignore[attr-defined]
        return "+f16c" in (config.CPU_FEATURES or "")  # type: ignore[attr-defined]
    try:
        import llvmlite.binding as llvm

        return bool(llvm.get_host_cpu_features().get("f16c"))
    except Exception:  # noqa: BLE001 - no feature list: take the portable kernels
        return False


HARDWARE = _cpu_converts_half()


def _cast_by_instruction(source, target, llvm_source, llvm_target, cast: str):
    """An intrinsic taking a float's bits (``source``, an unsigned int) to the bits of the float LLVM's ``cast``
    (``fptrunc``, ``fpext``) makes of it (``target``)."""
    @intrinsic
    def convert(typingctx, bits):
        def codegen(context, builder, signature, args):
            value = getattr(builder, cast)(builder.bitcast(args[0], llvm_source), llvm_target)
            return builder.bitcast(value, ir.IntType(target.bitwidth))

        return target(source), codegen

    return convert


# float32 -> float16 rounds to nearest even, like numpy's cast; float16 -> float32 is exact.
_narrow_by_instruction = _cast_by_instruction(types.uint32, types.uint16, ir.FloatType(), ir.HalfType(), "fptrunc")
_widen_by_instruction = _cast_by_instruction(types.uint16, types.uint32, ir.HalfType(), ir.FloatType(), "fpext")


@njit(cache=True, inline="always")
def _float_bits_to_half_bits(f: np.uint32) -> np.uint16:
    # The portable path. Every case is computed and the answer selected,
    # without branches, so that the row loops vectorize.
    one = np.uint32(1)
    sign = (f >> 16) & np.uint32(0x8000)
    a = f & np.uint32(0x7FFFFFFF)
    # A normal float16: rebias the exponent, round the 13 dropped bits to nearest even
    # (a carry out of the significand bumps the exponent, up to infinity: the right answer).
    normal = (a - np.uint32(0x38000000) + np.uint32(0x0FFF) + ((a >> 13) & one)) >> 13
    # A float16 subnormal (or zero): the significand with its implicit bit, shifted right
    # by 126 - exponent (clamped: a float32 subnormal or a tiny value shifts out to 0), rounded to even.
    e = np.minimum(a >> 23, np.uint32(125))
    shift = np.minimum(np.uint32(126) - e, np.uint32(31))
    sig = (a & np.uint32(0x007FFFFF)) | np.uint32(0x00800000)
    sub = sig >> shift
    rest = sig & ((one << shift) - one)
    halfway = one << (shift - one)
    sub += np.uint32((rest > halfway) | ((rest == halfway) & ((sub & one) == one)))
    nan = np.uint32(0x7C00) | ((a & np.uint32(0x007FFFFF)) >> 13) | one  # a NaN stays a NaN
    out = sub if a < np.uint32(0x38800000) else normal
    out = np.uint32(0x7C00) if a >= np.uint32(0x477FF000) else out  # rounds to 65536 or more: infinity
    out = nan if a > np.uint32(0x7F800000) else out
    return np.uint16(out | sign)


@njit(cache=True, inline="always")
def _half_bits_to_float_bits(h: np.uint16) -> np.uint32:
    # Branch-free for the same reason; a subnormal is its integer significand times 2**-24, exact in float32.
    bits = np.uint32(h)
    sign = (bits & np.uint32(0x8000)) << 16
    magnitude = bits & np.uint32(0x7FFF)
    normal = (magnitude << 13) + np.uint32(0x38000000)  # rebias the exponent by 127 - 15
    normal = normal + np.uint32(0x38000000) if magnitude >= np.uint32(0x7C00) else normal  # infinity, NaN
    sub = np.float32(np.float32(magnitude) * np.float32(2.0**-24)).view(np.uint32)
    out = sub if magnitude < np.uint32(0x0400) else normal
    return out | sign


# What the row kernels call: resolved when they compile (the on-disk cache is keyed by the CPU).
_narrow = _narrow_by_instruction if HARDWARE else _float_bits_to_half_bits
_widen = _widen_by_instruction if HARDWARE else _half_bits_to_float_bits


@njit(cache=True, nogil=True)  # releases the GIL: the client converts every shard's rows at once
def _gather_half_rows(src: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    dim = src.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        for j in range(dim):
            out[i, j] = _narrow(src[r, j])


@njit(cache=True, nogil=True)  # releases the GIL: the client converts every shard's rows at once
def _copy_half_rows(src: np.ndarray, src_rows: np.ndarray | None, out: np.ndarray, out_rows: np.ndarray) -> None:
    """``out[out_rows[i]] = src[src_rows[i]]``, widened; ``src_rows`` None (compiled apart): row ``i`` of src."""
    dim = src.shape[1]
    for i in range(src.shape[0] if src_rows is None else src_rows.shape[0]):
        s = i if src_rows is None else src_rows[i]
        o = out_rows[i]
        for j in range(dim):
            out[o, j] = _widen(src[s, j])


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
    _copy_half_rows(bits, None, out.view(np.uint32), np.ascontiguousarray(positions, dtype=np.int64))


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
