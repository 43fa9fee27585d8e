"""Helpers for dataset tests: small valid datasets and tampering that keeps checksums consistent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.dataset.manifest import sha256_file


@pytest.fixture
def dataset(tmp_path):
    """A demo dataset of 800 nodes written for the test, opened."""
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import open_dataset, write_dataset

    path = tmp_path / "demo"
    write_dataset(path, **generate_demo(num_nodes=800, feature_dim=4, seed=5))
    return open_dataset(path)


def tiny_arrays(n: int = 40, seed: int = 0) -> dict:
    """A small valid undirected graph with features, labels and a split."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, 4 * n)
    dst = rng.integers(0, n, 4 * n)
    indptr, indices = edges_to_csr(src, dst, n)
    labels = rng.integers(0, 3, n).astype(np.int64)
    labels[:3] = [0, 1, 2]
    perm = rng.permutation(n)
    return {
        "name": "tiny",
        "indptr": indptr,
        "indices": indices,
        "features": rng.normal(size=(n, 5)).astype(np.float32),
        "labels": labels,
        "splits": {"train": np.sort(perm[:20]), "val": np.sort(perm[20:30]), "test": np.sort(perm[30:])},
        "source": "test",
    }


def rewrite(directory: Path, rel: str, array: np.ndarray | None = None, raw: bytes | None = None) -> None:
    """Replace a file of a dataset and update its manifest checksum, so only the content check can fail."""
    target = directory / rel
    if array is not None:
        np.save(target, array, allow_pickle=array.dtype == object)
    else:
        target.write_bytes(raw)
    manifest_path = directory / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"][rel] = sha256_file(target)
    manifest_path.write_text(json.dumps(manifest))


@pytest.fixture
def tiny() -> dict:
    return tiny_arrays()


@pytest.fixture
def tiny_dataset(tmp_path, tiny) -> Path:
    from saintpipe.services.dataset.store import write_dataset

    out = tmp_path / "tiny"
    write_dataset(out, num_shards=2, **tiny)
    return out


@pytest.fixture
def rewrite_file():
    """``rewrite_file(dir, rel, array=... | raw=...)``: tamper with a dataset file, checksum kept consistent."""
    return rewrite


@pytest.fixture
def make_tiny():
    """``make_tiny(n, seed)``: a fresh dict of small valid dataset arrays."""
    return tiny_arrays


@pytest.fixture(scope="module")
def demo_1500(tmp_path_factory):
    """A 1,500-node demo dataset (seed 2, 4 feature columns), written once per test module."""
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import open_dataset, write_dataset

    path = tmp_path_factory.mktemp("demo-1500") / "demo"
    write_dataset(path, **generate_demo(num_nodes=1500, feature_dim=4, seed=2))
    return open_dataset(path)
