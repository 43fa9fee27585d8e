"""A small explicit-state random stream for the kernels: xoshiro256** seeded by splitmix64.

Why not ``np.random`` inside Numba: its state is global per thread and takes
32-bit seeds, so two samplers in one process would interleave their streams
and a 64-bit subgraph seed could not be replayed. Here the state is a
``uint64[4]`` array the caller owns, so a kernel is a pure function of
(graph, parameters, seed) and the same seed gives the same draws bit for bit.

Every integer here is kept ``uint64`` on purpose: Numba turns mixed
``uint64``/``int64`` arithmetic into float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MASK32 = np.uint64(0xFFFFFFFF)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
TWO53_INV = 1.0 / 9007199254740992.0


def new_state() -> np.ndarray:
    """An unseeded state array (seed it with :func:`seed_state`)."""
    return np.zeros(4, dtype=np.uint64)


@njit(cache=True, nogil=True)
def seed_state(state, seed):
    """Fill ``state`` from a 64-bit ``seed`` with splitmix64 (never all zero)."""
    x = np.uint64(seed)
    for i in range(4):
        x = x + GOLDEN
        state[i] = mix64(x)


@njit(cache=True, nogil=True, inline="always")
def mix64(z):
    """splitmix64's finalizer: a bijection of uint64 whose outputs look independent for nearby inputs."""
    z = (z ^ (z >> np.uint64(30))) * MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
def ones_below(un):
    """The all-ones mask just covering ``un - 1``: a masked draw is below ``un`` more than half the time."""
    mask = un - np.uint64(1)
    for shift in (1, 2, 4, 8, 16, 32):
        mask |= mask >> np.uint64(shift)
    return mask


@njit(cache=True, nogil=True)
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True, nogil=True, inline="always")
def step(s0, s1, s2, s3):
    """One xoshiro256** step on a state held in four locals: ``(64 random bits, s0, s1, s2, s3)``.

    A kernel that draws in a hot loop loads the state array into locals once
    (:func:`load`), draws with :func:`step` / :func:`bounded_local` and stores
    it back (:func:`store`): the state then stays in registers, where through
    the array every draw waits for the previous draw's stores (Numba cannot
    tell the state from the kernel's other arrays). The stream is the same.
    Inlined at the Numba level: LLVM alone leaves the tuple-returning call in
    place (twice as slow on cora's random walks).
    """
    result = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return result, s0, s1, s2, s3


@njit(cache=True, nogil=True)
def load(state):
    """The state array's four words, for :func:`step` and :func:`bounded_local`."""
    return state[0], state[1], state[2], state[3]


@njit(cache=True, nogil=True)
def store(state, s0, s1, s2, s3):
    """Write four words back into the state array."""
    state[0] = s0
    state[1] = s1
    state[2] = s2
    state[3] = s3


@njit(cache=True, nogil=True)
def next_u64(state):
    """The next 64 random bits (xoshiro256**)."""
    result, s0, s1, s2, s3 = step(state[0], state[1], state[2], state[3])
    store(state, s0, s1, s2, s3)
    return result


@njit(cache=True, nogil=True)
def next_u32(state):
    """32 random bits (the high half, xoshiro's best bits), as uint64."""
    return next_u64(state) >> np.uint64(32)


@njit(cache=True, nogil=True, inline="always")
def bounded_local(s0, s1, s2, s3, n):
    """:func:`bounded` on a state in locals: ``(value, s0, s1, s2, s3)``."""
    un = np.uint64(n)
    if un <= MASK32:
        x, s0, s1, s2, s3 = step(s0, s1, s2, s3)
        m = (x >> np.uint64(32)) * un
        low = m & MASK32
        if low < un:
            threshold = (np.uint64(0x100000000) - un) % un
            while low < threshold:
                x, s0, s1, s2, s3 = step(s0, s1, s2, s3)
                m = (x >> np.uint64(32)) * un
                low = m & MASK32
        return np.int64(m >> np.uint64(32)), s0, s1, s2, s3
    mask = ones_below(un)
    x, s0, s1, s2, s3 = step(s0, s1, s2, s3)
    x &= mask
    while x >= un:
        x, s0, s1, s2, s3 = step(s0, s1, s2, s3)
        x &= mask
    return np.int64(x), s0, s1, s2, s3


@njit(cache=True, nogil=True)
def bounded(state, n):
    """A uniform integer in ``[0, n)`` as int64, exactly (no modulo bias); ``n >= 1``.

    Lemire's multiply-and-reject for ``n < 2**32``; a masked rejection loop above.
    """
    value, s0, s1, s2, s3 = bounded_local(state[0], state[1], state[2], state[3], n)
    store(state, s0, s1, s2, s3)
    return value


@njit(cache=True, nogil=True)
def uniform(state):
    """A uniform float64 in ``[0, 1)`` with 53 random bits."""
    return np.float64(next_u64(state) >> np.uint64(11)) * TWO53_INV
