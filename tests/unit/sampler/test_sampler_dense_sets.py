"""The fast paths of the random walk and the induction give exactly what the plain ways give.

* Sorting the node set by scanning the membership bitset (dense sets) and by
  ``np.sort`` (sparse sets) give the same ids; whole samplers on both kinds
  of set equal the numpy reference induction.
* The random stream held in registers is xoshiro256** + Lemire exactly
  (checked against a pure-Python transcription, not against the kernels).
* The branchless union of the walks, down to the last slot of ``sel``.
* The half-pass Algorithm 6 against scipy's transpose, with self loops, and
  its symmetry check on every single missing entry.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sampler_graphs import assert_valid_subgraph, random_graph, star
from saintpipe.services.sampler.config import RandomWalkConfig
from saintpipe.services.sampler.kernels import rng
from saintpipe.services.sampler.kernels.induce import (DENSE_WORDS_PER_NODE, bitset_words, radix_sort_ids,
                                                       sorted_node_ids, transpose_weights)
from saintpipe.services.sampler.kernels.random_walk import random_walks
from saintpipe.services.sampler.reference import induce_numpy
from saintpipe.services.sampler.sampler import make_sampler

M64 = (1 << 64) - 1


class PyStream:
    """splitmix64 seeding, xoshiro256** and Lemire's bounded draw, transcribed from their papers in Python."""

    def __init__(self, seed: int) -> None:
        self.s = []
        x = seed
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def _rotl(x: int, k: int) -> int:
        return ((x << k) | (x >> (64 - k))) & M64

    def next_u64(self) -> int:
        s = self.s
        result = (self._rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def bounded(self, n: int) -> int:
        if n < 2**32:
            m = (self.next_u64() >> 32) * n
            if (m & 0xFFFFFFFF) < n:
                threshold = (2**32 - n) % n
                while (m & 0xFFFFFFFF) < threshold:
                    m = (self.next_u64() >> 32) * n
            return m >> 32
        mask = (1 << (n - 1).bit_length()) - 1
        x = self.next_u64() & mask
        while x >= n:
            x = self.next_u64() & mask
        return x


@pytest.mark.parametrize("n", [1, 3, 2708, 2**31 + 11, 2**32 - 1, 2**32 + 5, 3 * 2**61])
def test_bounded_draws_are_xoshiro_and_lemire_exactly(n):
    state = rng.new_state()
    rng.seed_state(state, np.uint64(2024))
    ref = PyStream(2024)
    assert [int(rng.bounded(state, np.int64(n))) for _ in range(300)] == [ref.bounded(n) for _ in range(300)]
    assert int(rng.next_u64(state)) == ref.next_u64(), "the state array holds the stream's state afterwards"


def test_random_walks_follow_the_python_stream():
    indptr, indices = random_graph(200, 300, seed=4, isolated=30)
    indptr, indices = indptr.astype(np.int64), indices.astype(np.int32)
    state = rng.new_state()
    rng.seed_state(state, np.uint64(77))
    paths = np.empty((500, 4), dtype=np.int32)
    random_walks(indptr, indices, state, paths)
    ref = PyStream(77)
    expected = np.full_like(paths, -1)
    for i in range(paths.shape[0]):
        u = ref.bounded(200)
        expected[i, 0] = u
        for j in range(1, paths.shape[1]):
            deg = int(indptr[u + 1] - indptr[u])
            if deg == 0:
                break
            u = int(indices[indptr[u] + ref.bounded(deg)])
            expected[i, j] = u
    assert np.array_equal(paths, expected)
    assert int(rng.next_u64(state)) == ref.next_u64()


@pytest.mark.parametrize("num_nodes,ids", [
    (1, [0]),
    (64, [63, 0, 5]),
    (65, [64, 63, 0]),
    (200, list(range(199, -1, -1))),
    (5000, [4999, 0, 64, 63, 128, 4095, 4096]),
    (100_000, [99_999, 3, 50_000]),
])
@pytest.mark.parametrize("factor", [0, DENSE_WORDS_PER_NODE, 10**9], ids=["sort", "default", "scan"])
def test_sorted_node_ids_scan_and_sort_agree(num_nodes, ids, factor):
    sel = np.array([7, 7] + ids + [7], dtype=np.int32)  # sel[2:-1] is the set; the rest must be ignored
    bits = np.zeros(bitset_words(num_nodes), dtype=np.uint64)
    out = sorted_node_ids(bits, sel, 2, 2 + len(ids), factor)
    assert out.dtype == np.int64 and np.array_equal(out, np.sort(ids))
    members = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little"))
    assert np.array_equal(members, np.sort(ids)), "exactly the set's bits are set"
    assert sorted_node_ids(bits[:0], sel, 3, 3, factor).size == 0


@pytest.mark.parametrize("span", [1, 2**11, 2**11 + 1, 2**22 + 5, 2**31 - 1])
@pytest.mark.parametrize("size", [1, 2, 3000])
def test_radix_sort_matches_numpy(span, size):
    """The sparse sets' sort: one to three radix passes, ids offset from the set's minimum, duplicates kept."""
    values = np.random.default_rng(size + span).integers(0, span, size=size, dtype=np.int64).astype(np.int32)
    out = np.empty(size, dtype=np.int64)
    radix_sort_ids(values, values.min(), values.max(), out)
    assert np.array_equal(out, np.sort(values))


def _branch(node_ids: np.ndarray) -> str:
    span = int(node_ids[-1]) // 64 - int(node_ids[0]) // 64 + 1
    return "scan" if span <= DENSE_WORDS_PER_NODE * node_ids.size else "sort"


@pytest.mark.parametrize("roots,branch", [(8, "sort"), (20_000, "scan")])
@pytest.mark.parametrize("clip", [None, 16])
def test_dense_and_sparse_node_sets_equal_the_reference(roots, branch, clip):
    indptr, indices = random_graph(100_000, 200_000, seed=8, isolated=100)
    sampler = make_sampler(RandomWalkConfig(roots=roots, walk_length=2, clip_multiple=clip), indptr, indices)
    for seed in range(3):
        g = sampler.sample(seed)
        assert _branch(g.node_ids) == branch
        assert_valid_subgraph(g, indptr.size - 1, clip)
        if clip is None:
            state = rng.new_state()
            rng.seed_state(state, np.uint64(seed))
            paths = np.empty((roots, 3), dtype=np.int32)
            random_walks(sampler.indptr, sampler.indices, state, paths)
            assert np.array_equal(g.node_ids, np.unique(paths[paths >= 0]))
        ref = induce_numpy(indptr, indices, g.node_ids)
        for name in ("indptr", "indices", "edge_weights", "edge_weights_t"):
            assert np.array_equal(getattr(g, name), getattr(ref, name)), name
    assert not sampler._bits.any(), "the node set is emptied after each call"


def test_walks_covering_the_whole_graph_fill_the_last_slot():
    indptr, indices = star(4)  # 5 nodes; 3000 walks visit every one, so sel (5 slots) fills up
    sampler = make_sampler(RandomWalkConfig(roots=3000, walk_length=2, clip_multiple=None), indptr, indices)
    assert sampler._sel.size == 5
    for seed in range(5):
        assert np.array_equal(sampler.sample(seed).node_ids, np.arange(5))
    assert not sampler._bits.any()


def _symmetric_pattern(n: int, seed: int) -> sp.csr_matrix:
    r = np.random.default_rng(seed)
    a = sp.random(n, n, density=0.15, random_state=r, format="csr")
    a = ((a + a.T) > 0).astype(np.float64).tolil()
    for i in r.choice(n, size=n // 3, replace=False):
        a[i, i] = 1.0  # self loops are their own partners
    a = a.tocsr()
    a.sort_indices()
    return a


@pytest.mark.parametrize("seed", range(4))
def test_half_pass_transpose_equals_scipy_with_self_loops(seed):
    a = _symmetric_pattern(40, seed)
    indptr, indices = a.indptr.astype(np.int64), a.indices.astype(np.int32)
    weights = np.random.default_rng(seed).uniform(0.1, 1, indices.size).astype(np.float32)
    weights_t = np.full_like(weights, np.nan)
    assert transpose_weights(indptr, indices, weights, weights_t) == -1
    wt = sp.csr_matrix((weights, indices, indptr), shape=a.shape).T.tocsr()
    wt.sort_indices()
    assert np.array_equal(wt.indices, indices) and np.array_equal(weights_t, wt.data)


def test_every_missing_reverse_is_reported_at_a_row_that_lacks_it():
    a = _symmetric_pattern(25, 11)
    rows = np.repeat(np.arange(25), np.diff(a.indptr))
    for k in range(a.indices.size):
        if rows[k] == a.indices[k]:
            continue  # removing a self loop keeps the pattern symmetric
        keep = np.ones(a.indices.size, dtype=bool)
        keep[k] = False
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=25))]).astype(np.int64)
        indices = a.indices[keep].astype(np.int32)
        weights = np.ones(indices.size, dtype=np.float32)
        bad = transpose_weights(indptr, indices, weights, np.empty_like(weights))
        assert bad == a.indices[k], f"entry ({rows[k]}, {a.indices[k]}) removed: its reverse's row"
