"""The Kronecker (R-MAT) generator: statistics, invariants, determinism, permutation."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.kronecker import INITIATOR, generate_kronecker, rmat_edges
from saintpipe.services.dataset.store import open_dataset, write_dataset


@pytest.fixture(scope="module")
def graph():
    return generate_kronecker(14, 16, seed=3)


def test_node_count_and_exact_mean_degree(graph):
    n = graph["indptr"].size - 1
    assert n == 2**14
    assert graph["indices"].size / n == pytest.approx(16, rel=0.01)


def test_topology_is_sorted_symmetric_without_self_loops(graph):
    indptr, indices = graph["indptr"], graph["indices"]
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    checks.check_topology(indptr, indices, symmetric=True)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    assert not (rows == indices).any()


def test_degrees_are_heavy_tailed(graph):
    deg = np.diff(graph["indptr"]).astype(np.float64)
    # An Erdos-Renyi graph of mean degree 16 has max degree near 35 and almost no skew.
    assert deg.max() > 20 * deg.mean()
    skew = ((deg - deg.mean()) ** 3).mean() / deg.std() ** 3
    assert skew > 5
    top = np.sort(deg)[::-1]
    assert top[: deg.size // 100].sum() > 0.1 * deg.sum()  # top 1% hold >10% of edge ends (ER: about 2%)


def test_node_ids_are_permuted_so_hubs_are_spread(graph):
    deg = np.diff(graph["indptr"])
    # Without the permutation node 0 (all-zero bits, the 0.45 quadrant at every level) is the biggest hub.
    hubs = np.argsort(deg)[::-1][:50]
    assert hubs.min() > 0 and np.median(hubs) > 2**14 / 8


def test_quadrant_probabilities_follow_the_initiator():
    src, dst = rmat_edges(200_000, 1, np.random.default_rng(0))
    observed = np.bincount(src * 2 + dst, minlength=4) / src.size
    np.testing.assert_allclose(observed, (INITIATOR / INITIATOR.sum()).ravel(), atol=0.01)


def test_features_labels_and_splits(graph):
    n = graph["indptr"].size - 1
    assert graph["features"].shape == (n, 50) and graph["features"].dtype == np.float32
    assert set(np.unique(graph["labels"])) == set(range(10))
    sizes = {k: v.size for k, v in graph["splits"].items()}
    assert sum(sizes.values()) == n and sizes["train"] == int(0.6 * n)
    checks.check_splits(graph["splits"], graph["labels"], n)


def test_same_seed_same_graph_other_seed_differs():
    a, b, c = (generate_kronecker(10, 8, seed=s, feature_dim=4) for s in (1, 1, 2))
    assert np.array_equal(a["indices"], b["indices"]) and np.array_equal(a["features"], b["features"])
    assert not np.array_equal(a["indices"], c["indices"])


def test_dense_small_graph_reaches_its_degree():
    g = generate_kronecker(6, 20, seed=0)  # 64 nodes, heavy duplication: needs several top-up rounds
    assert g["indices"].size / 64 == pytest.approx(20, rel=0.05)


@pytest.mark.parametrize("kwargs", [dict(scale=0, degree=4), dict(scale=31, degree=4), dict(scale=4, degree=15),
                                    dict(scale=4, degree=0), dict(scale=8, degree=4, feature_dim=0),
                                    dict(scale=8, degree=4, num_classes=0)])
def test_impossible_arguments_are_refused(kwargs):
    with pytest.raises(InvalidArgument):
        generate_kronecker(**kwargs)


def test_round_trip_write_verify_load(tmp_path):
    g = generate_kronecker(10, 8, seed=5, feature_dim=7)
    write_dataset(tmp_path / "k", num_shards=3, **g)
    ds = open_dataset(tmp_path / "k", verify=True)
    assert np.array_equal(ds.indptr, g["indptr"]) and np.array_equal(ds.indices, g["indices"])
    assert np.array_equal(ds.features(), g["features"]) and np.array_equal(ds.labels, g["labels"])
    for k in ("train", "val", "test"):
        assert np.array_equal(ds.splits[k], g["splits"][k])
