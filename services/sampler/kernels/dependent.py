"""Dependent minibatches (Cooperative Minibatching, section 4.2 and appendix A.7): slowly changing variates.

A sampler with ``kappa > 1`` draws a subgraph of a *chain* (one per sampler
worker) at a *step* (the worker's sequence number). Its random choices are
split into *slots*, each with its own little random stream: slot ``j`` is one
node draw (node sampler), one edge draw (edge sampler), one whole walk
(random walk) or one walker of the frontier. The stream of slot ``j`` at step
``t`` is seeded by a pure function of ``(chain, j, q)`` where ``q`` is the
period ``p = t // kappa`` or the next one, ``p + 1``:

* at the first step of a period every slot uses ``q = p`` (the paper's ``c = 0``:
  the variates of seed ``z_1``);
* each slot switches to ``q = p + 1`` at one step of the period, drawn
  uniformly (again a pure function of ``(chain, j, p)``), so from one step to
  the next about ``1 / kappa`` of the slots change (the paper's
  interpolation speed) and after ``kappa`` steps all of them did (``c = 1``:
  the variates of ``z_2``, which become the next period's ``z_1``).

Why a switch rather than the paper's ``cos(c pi / 2) n_1 + sin(c pi / 2) n_2``:
GraphSAINT's samplers turn a uniform variate into one of N nodes or E edges
(an alias draw, a uniform root), a step function with steps 1/N wide, so a
variate that moves continuously by ~1/kappa picks another node almost surely
and consecutive subgraphs would share nothing. Switching whole slots keeps
what the paper's construction guarantees: at every step each slot's stream is
a fresh uniform stream independent of the other slots (which of the two
periods a slot uses is decided by a separate hash, independent of the
streams), so **one subgraph has exactly the law of an independent draw**, and
the dependence between consecutive steps decays to none after ``kappa``.

Every integer stays ``uint64`` (see :mod:`rng`). The slot streams are
splitmix64 sequences held in one local (``x``): a handful of draws per slot
do not pay for seeding a xoshiro state.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.rng import GOLDEN, MASK32, MIX1, TWO53_INV, mix64, ones_below
from saintpipe.services.sampler.kernels.select import is_marked, unmark_node

_SWITCH = np.uint64(0xD1B54A32D192ED03)  # separates the switch-time hashes from the stream seeds
_ONE = np.uint64(1)


@njit(cache=True, nogil=True, inline="always")
def hash3(key, a, b):
    """A 64-bit hash of three uint64 words."""
    h = mix64(key + GOLDEN)
    h = mix64(h ^ (a + GOLDEN))
    return mix64(h ^ (b * MIX1 + GOLDEN))


@njit(cache=True, nogil=True, inline="always")
def slot_seed(chain, slot, step, kappa):
    """The seed of slot ``slot``'s stream at step ``step`` of chain ``chain`` (all uint64, ``kappa >= 1``)."""
    period = step // kappa
    pos = step - period * kappa
    # The step of the period at which this slot switches to the next period's stream, uniform in [1, kappa].
    switch = _ONE + (((hash3(chain ^ _SWITCH, slot, period) >> np.uint64(32)) * kappa) >> np.uint64(32))
    q = period + _ONE if pos >= switch else period
    return hash3(chain, slot, q)


@njit(cache=True, nogil=True, inline="always")
def next_bits(x):
    """splitmix64: ``(64 random bits, new state)``."""
    x = x + GOLDEN
    return mix64(x), x


@njit(cache=True, nogil=True, inline="always")
def bounded(x, n):
    """A uniform integer in ``[0, n)`` (``1 <= n``), exactly (Lemire below 2**32, masked rejection above):
    ``(value as int64, new state)``."""
    un = np.uint64(n)
    if un <= MASK32:
        r, x = next_bits(x)
        m = (r >> np.uint64(32)) * un
        low = m & MASK32
        if low < un:
            threshold = (np.uint64(0x100000000) - un) % un
            while low < threshold:
                r, x = next_bits(x)
                m = (r >> np.uint64(32)) * un
                low = m & MASK32
        return np.int64(m >> np.uint64(32)), x
    mask = ones_below(un)
    r, x = next_bits(x)
    r &= mask
    while r >= un:
        r, x = next_bits(x)
        r &= mask
    return np.int64(r), x


@njit(cache=True, nogil=True, inline="always")
def alias_draw(x, thresh, alias):
    """One draw from an alias table (the law of ``alias.draw_block``): ``(outcome as int64, new state)``."""
    k, x = bounded(x, thresh.size)
    r, x = next_bits(x)
    if (r >> np.uint64(32)) < np.uint64(thresh[k]):
        return k, x
    return np.int64(alias[k]), x


@njit(cache=True, nogil=True, inline="always")
def exponential(x):
    """A standard exponential variate, ``-log(u)`` with ``u`` uniform in (0, 1]: ``(value, new state)``."""
    r, x = next_bits(x)
    u = np.float64((r >> np.uint64(11)) + _ONE) * TWO53_INV
    return -np.log(u), x


_CLIP = np.uint64(0x8CB92BA72F3D8DD7)  # separates the clipping keys from the slot streams


@njit(cache=True, nogil=True)
def sift_down(keys, values, i, size):
    """Restore the min-heap property of ``keys[:size]`` (with ``values`` alongside) below position ``i``."""
    key = keys[i]
    value = values[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] < keys[child]:
            child += 1
        if keys[child] >= key:
            break
        keys[i] = keys[child]
        values[i] = values[child]
        i = child
    keys[i] = key
    values[i] = value


@njit(cache=True, nogil=True)
def clip_nodes_dependent(chain, step, kappa, bits, sel, count, multiple):
    """Node clipping with dependent variates: drop the ``count % multiple`` nodes of ``sel[:count]`` whose keys
    are smallest; returns the new count (the kept nodes stay in ``sel[:new count]``, the dropped are unmarked).

    Node ``v``'s key is a stream seed of slot ``v`` in a chain of its own, so the keys are i.i.d. uniform
    and independent of which nodes were selected: the dropped nodes are a uniform subset of the set, the law
    of ``induce.clip_nodes``, and they change slowly along the chain like everything else. Sets smaller than
    ``multiple`` (and ``multiple <= 1``) are kept whole. O(count log drop), scratch O(drop).
    """
    if multiple <= 1 or count < multiple:
        return count
    drop = count % multiple
    if drop == 0:
        return count
    c, t, k = np.uint64(chain) ^ _CLIP, np.uint64(step), np.uint64(kappa)
    # The drop smallest keys seen so far, complemented (~key) so that the min-heap holds the largest on top.
    keys = np.empty(drop, dtype=np.uint64)
    idx = np.empty(drop, dtype=np.int64)
    for i in range(count):
        key = slot_seed(c, np.uint64(sel[i]), t, k)
        if i < drop:
            keys[i] = ~key
            idx[i] = i
            if i == drop - 1:
                for j in range(drop // 2 - 1, -1, -1):
                    sift_down(keys, idx, j, drop)
        elif key < ~keys[0]:
            keys[0] = ~key
            idx[0] = i
            sift_down(keys, idx, 0, drop)
    for j in range(drop):
        unmark_node(bits, sel[idx[j]])
    kept = 0
    for i in range(count):
        v = sel[i]
        if is_marked(bits, v):
            sel[kept] = v
            kept += 1
    return kept
