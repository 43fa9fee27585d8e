"""A Fenwick (binary indexed) tree of integer weights: draw a slot in proportion to its weight, reweigh a slot.

Both are O(log m) on an int64 array of ``m + 1`` entries (8 KiB for the
paper's frontier of 1000), which stays in L1. The frontier sampler keeps one
slot per frontier walker, weighted by its node's degree, so a draw pops node
``u`` with probability ``deg(u) / sum(deg(FS))``: Algorithm 2 line 5 exactly,
at a cost that does not depend on the degrees (``kernels/frontier.py`` says
why that matters on large graphs).

Layout: ``tree[0]`` is unused; ``tree[i]`` (1-based) holds the sum of the
weights of slots ``i - lowbit(i) .. i - 1`` (0-based), ``lowbit(i) = i & -i``.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def build(weights, m, tree):
    """Fill ``tree[:m + 1]`` from ``weights[:m]`` (non-negative) in O(m); returns their sum."""
    tree[0] = 0
    for i in range(1, m + 1):
        tree[i] = weights[i - 1]
    for i in range(1, m + 1):
        parent = i + (i & -i)
        if parent <= m:
            tree[parent] += tree[i]
    total = np.int64(0)
    for i in range(m):
        total += weights[i]
    return total


@njit(cache=True, nogil=True, inline="always")
def top_bit(m):
    """The largest power of two not above ``m`` (``m >= 1``): the first step of :func:`find`."""
    step = np.int64(1)
    while step * 2 <= m:
        step *= 2
    return step


@njit(cache=True, nogil=True, inline="always")
def find(tree, m, top, x):
    """The slot ``j`` (0-based) with ``prefix(j) <= x < prefix(j + 1)``, for ``0 <= x < total``.

    Slots of weight 0 own an empty range and are never returned. ``top`` is :func:`top_bit` of ``m``.
    """
    pos = np.int64(0)
    step = top
    while step > 0:
        nxt = pos + step
        if nxt <= m and tree[nxt] <= x:
            pos = nxt
            x -= tree[nxt]
        step >>= 1
    return pos


@njit(cache=True, nogil=True, inline="always")
def add(tree, m, slot, delta):
    """Add ``delta`` to the weight of ``slot`` (0-based)."""
    i = slot + 1
    while i <= m:
        tree[i] += delta
        i += i & -i
