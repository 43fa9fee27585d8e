"""Copying received rows to their places in the caller's array, without holding the GIL.

A gather's shards answer on several threads at once; numpy's fancy
assignment (``out[positions] = rows``) holds the GIL while it copies, so the
threads' copies ran one after another. This kernel releases it.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _scatter_rows(src: np.ndarray, positions: np.ndarray, out: np.ndarray) -> None:
    width = src.shape[1]
    for i in range(src.shape[0]):
        p = positions[i]
        for j in range(width):
            out[p, j] = src[i, j]


_AS_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}  # copied as bit patterns: Numba has no float16


def scatter_rows(rows: np.ndarray, positions: np.ndarray, out: np.ndarray) -> None:
    """``out[positions] = rows`` for 2-D ``rows`` and C-contiguous ``out`` of one dtype and width
    (positions not checked)."""
    if rows.shape[0] == 0:
        return
    bits = _AS_BITS.get(out.dtype.itemsize)
    if bits is None:
        out[positions] = rows
        return
    _scatter_rows(
        np.ascontiguousarray(rows).view(bits), np.ascontiguousarray(positions, dtype=np.int64), out.view(bits)
    )
