"""Walker's alias method (Vose's construction): O(n) to build once, O(1) per draw.

A table over ``n`` outcomes stores, per column ``k``, an acceptance threshold
``thresh[k]`` (uint32, the probability scaled to 2**32) and an alternative
``alias[k]``. A draw picks a column uniformly, then keeps it when 32 fresh
random bits fall under the threshold and takes the alias otherwise.
Columns that are full keep themselves as alias, so the 2**-32 rounding of a
full column never moves probability elsewhere.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.rng import bounded, next_u32

_SCALE = 4294967296.0  # 2**32


@njit(cache=True, nogil=True)
def build_alias(weights, thresh, alias):
    """Fill ``thresh`` (uint32 [n]) and ``alias`` (int [n]) for probabilities proportional to ``weights``.

    ``weights`` (float64 [n]) must be non-negative with a positive sum; it is
    used as scratch and overwritten.
    """
    n = weights.size
    total = 0.0
    for k in range(n):
        total += weights[k]
    scale = n / total
    # Small columns stack from the front of `work`, large ones from the back.
    work = np.empty(n, dtype=np.int64)
    n_small = 0
    n_large = 0
    for k in range(n):
        weights[k] *= scale
        alias[k] = k
        if weights[k] < 1.0:
            work[n_small] = k
            n_small += 1
        else:
            n_large += 1
            work[n - n_large] = k
    while n_small > 0 and n_large > 0:
        n_small -= 1
        s = work[n_small]
        g = work[n - n_large]
        thresh[s] = np.uint32(min(weights[s] * _SCALE, _SCALE - 1.0))
        alias[s] = g
        weights[g] = (weights[g] + weights[s]) - 1.0
        if weights[g] < 1.0:
            n_large -= 1
            work[n_small] = g
            n_small += 1
    # Whatever is left is full up to rounding: it keeps itself.
    for i in range(n_small):
        k = work[i]
        thresh[k] = np.uint32(0xFFFFFFFF)
        alias[k] = k
    for i in range(n_large):
        k = work[n - 1 - i]
        thresh[k] = np.uint32(0xFFFFFFFF)
        alias[k] = k


DRAW_BLOCK = 256  # draws per block of draw_block: its scratch stays in L1


@njit(cache=True, nogil=True)
def draw_block(state, thresh, alias, columns, coins, out, m):
    """``out[:m]``: ``m`` independent draws from an alias table (a uniform column ``k``, kept when a 32-bit
    coin falls below ``thresh[k]``, else ``alias[k]``).

    The random numbers come first (column, coin, column, coin, ...), then the
    table reads. Those no longer wait on each other, so the CPU overlaps their
    cache misses on a table larger than the caches.
    ``columns`` (int64) and ``coins`` (uint32) are scratch of at least ``m``.
    """
    for j in range(m):
        columns[j] = bounded(state, thresh.size)
        coins[j] = next_u32(state)
    for j in range(m):
        k = columns[j]
        out[j] = k if coins[j] < thresh[k] else np.int64(alias[k])
