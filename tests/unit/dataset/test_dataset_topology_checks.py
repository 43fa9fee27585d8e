"""The CSR checks that run before a dataset is written or verified: order and symmetry, checked in place."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.checks import check_topology


def csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.array([v for r in rows for v in r], dtype=np.int32)
    return indptr, indices


def test_a_symmetric_graph_passes_and_self_loops_are_their_own_reverse():
    assert check_topology(*csr([[1, 2], [0, 1], [0]]), symmetric=True) == 3


@pytest.mark.parametrize("rows,edge", [
    ([[1, 2], [0], []], "(0, 2) has no reverse edge (2, 0)"),          # above the diagonal
    ([[1], [0], [0]], "(2, 0) has no reverse edge (0, 2)"),            # below it: the halves' sizes differ
    ([[2], [2], [0]], "(1, 2) has no reverse edge (2, 1)"),            # same sizes, a different reverse
])
def test_a_missing_reverse_is_named_on_either_side_of_the_diagonal(rows, edge):
    with pytest.raises(DatasetError, match=re.escape(f"t: adjacency is not symmetric: edge {edge}")):
        check_topology(*csr(rows), symmetric=True, where="t")
    assert check_topology(*csr(rows), symmetric=False) == 3  # a directed graph may


@pytest.mark.parametrize("rows,node", [([[1, 1], [0]], 0), ([[1], [0], [1, 0]], 2), ([[], [2, 0], [1]], 1)])
def test_an_unsorted_or_duplicated_neighbour_list_is_named(rows, node):
    with pytest.raises(DatasetError, match=rf"neighbour list of node {node} is not sorted ascending"):
        check_topology(*csr(rows), symmetric=False)


def test_random_graphs_agree_with_scipy_on_symmetry():
    rng = np.random.default_rng(0)
    for trial in range(30):
        n = int(rng.integers(2, 40))
        a = sp.random(n, n, density=0.15, random_state=trial, format="csr")
        if trial % 2:
            a = a + a.T  # symmetric half the time
        a = sp.csr_matrix((np.ones(a.nnz), a.indices, a.indptr), shape=(n, n))
        a.sum_duplicates()
        a.sort_indices()
        indptr, indices = a.indptr.astype(np.int64), a.indices.astype(np.int32)
        symmetric = (a != a.T).nnz == 0
        if symmetric:
            assert check_topology(indptr, indices, symmetric=True) == n
        else:
            with pytest.raises(DatasetError, match="not symmetric: edge"):
                check_topology(indptr, indices, symmetric=True)
