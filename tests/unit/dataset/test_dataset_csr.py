"""edges_to_csr: rows by counting, each sorted and deduplicated, against a set of edge pairs."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.csr import edges_to_csr


def pairs(indptr: np.ndarray, indices: np.ndarray) -> list[tuple[int, int]]:
    return [(u, int(v)) for u in range(indptr.size - 1) for v in indices[indptr[u]:indptr[u + 1]]]


@pytest.mark.parametrize("symmetrize", [True, False])
@pytest.mark.parametrize("drop_self_loops", [True, False])
def test_random_edges_with_duplicates_and_self_loops(symmetrize, drop_self_loops):
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 60):
        src, dst = rng.integers(0, n, 400), rng.integers(0, n, 400)
        indptr, indices = edges_to_csr(src, dst, n, symmetrize=symmetrize, drop_self_loops=drop_self_loops)
        expected = set(zip(src.tolist(), dst.tolist()))
        if symmetrize:
            expected |= {(v, u) for u, v in expected}
        if drop_self_loops:
            expected = {(u, v) for u, v in expected if u != v}
        assert pairs(indptr, indices) == sorted(expected)  # rows in order, each ascending, no duplicates
        assert indptr.dtype == np.int64 and indices.dtype == np.int32 and indptr[0] == 0


def test_no_edges_and_isolated_nodes():
    indptr, indices = edges_to_csr(np.array([3]), np.array([1]), 5)
    assert indptr.tolist() == [0, 0, 1, 1, 2, 2] and indices.tolist() == [3, 1]
    indptr, indices = edges_to_csr(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 3)
    assert indptr.tolist() == [0, 0, 0, 0] and indices.size == 0


def test_an_endpoint_out_of_range_is_refused():
    with pytest.raises(DatasetError, match=r"edge endpoint out of range \[0, 4\)"):
        edges_to_csr(np.array([0, 4]), np.array([1, 2]), 4)
