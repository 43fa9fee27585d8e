"""The full-batch GCN recipe's inputs: row-normalised features and the renormalised adjacency; the bench's setup."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.bench.accuracy.settings import SAMPLERS, SamplingSetup
from saintpipe.bench.accuracy.full_batch import gcn_adjacency, row_normalize


def test_row_normalize_divides_each_row_by_its_sum_and_keeps_empty_rows_zero():
    features = np.array([[1.0, 0.0, 3.0], [0.0, 0.0, 0.0], [2.0, 2.0, 0.0]], dtype=np.float32)
    out = row_normalize(features)
    np.testing.assert_allclose(out, [[0.25, 0.0, 0.75], [0.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    assert out.dtype == np.float32
    assert features[0, 2] == 3.0  # the input is left as it was


def test_row_normalize_on_cora_gives_rows_summing_to_one(real_datasets):
    from saintpipe.bench.accuracy.experiment import load_planetoid

    graph = load_planetoid(real_datasets / "cora.npz")
    x = graph.gather(np.arange(graph.num_nodes))
    np.testing.assert_allclose(x.sum(axis=1), 1.0, rtol=1e-5)  # Cora has no empty feature row
    raw = np.load(real_datasets / "cora.npz")["features"]
    np.testing.assert_allclose(x[7] * raw[7].sum(), raw[7], rtol=1e-5)  # proportions kept
    raw_graph = load_planetoid(real_datasets / "cora.npz", normalize_features=False)
    np.testing.assert_array_equal(raw_graph.gather(np.arange(3)), raw[:3])


def _path_graph() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # 0 - 1 - 2, and 3 alone: CSR and its dense adjacency.
    dense = np.zeros((4, 4))
    for u, v in [(0, 1), (1, 2)]:
        dense[u, v] = dense[v, u] = 1.0
    indptr = np.concatenate([[0], np.cumsum(dense.sum(1))]).astype(np.int64)
    indices = np.concatenate([np.flatnonzero(row) for row in dense]).astype(np.int32)
    return indptr, indices, dense


def test_symmetric_adjacency_is_kipfs_renormalisation_trick():
    indptr, indices, dense = _path_graph()
    a_tilde = dense + np.eye(4)
    d = a_tilde.sum(1)
    expected = a_tilde / np.sqrt(np.outer(d, d))
    np.testing.assert_allclose(gcn_adjacency(indptr, indices, "sym").to_dense().numpy(), expected, rtol=1e-6)


def test_random_walk_adjacency_rows_sum_to_one():
    indptr, indices, dense = _path_graph()
    a_hat = gcn_adjacency(indptr, indices, "rw").to_dense().numpy()
    np.testing.assert_allclose(a_hat.sum(1), 1.0, rtol=1e-6)
    assert a_hat[0, 0] == pytest.approx(0.5) and a_hat[1, 0] == pytest.approx(1 / 3)


def test_auto_normalization_is_exact_where_a_closed_form_exists_and_smoothed_elsewhere():
    setup = SamplingSetup()
    assert {kind: setup.method(kind) for kind in SAMPLERS} == {
        "random_walk": "smoothed", "node": "exact", "edge": "exact", "frontier": "smoothed"}
    assert SamplingSetup(normalization="reference").method("node") == "reference"
    configs = {kind: setup.sampler_config(kind) for kind in SAMPLERS}
    assert {kind: c.kind for kind, c in configs.items()} == {kind: kind for kind in SAMPLERS}
    assert configs["frontier"].node_budget == setup.frontier_budget
