"""Importing the Planetoid npz format: round trips on cora and citeseer, and every bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.npz import import_npz
from saintpipe.services.dataset.store import open_dataset, write_dataset


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_round_trip_import_verify_load(tmp_path, real_datasets, name):
    src = dict(np.load(real_datasets / f"{name}.npz"))
    data = import_npz(real_datasets / f"{name}.npz")
    write_dataset(tmp_path / name, num_shards=3, **data)
    ds = open_dataset(tmp_path / name, verify=True)
    assert ds.manifest.name == name
    assert np.array_equal(ds.indptr, src["indptr"]) and np.array_equal(ds.indices, src["indices"])
    assert np.array_equal(ds.features(), src["features"]) and np.array_equal(ds.labels, src["labels"])
    for split in ("train", "val", "test"):
        assert np.array_equal(ds.splits[split], np.flatnonzero(src[f"{split}_mask"]))
    if name == "citeseer":
        assert (ds.labels == -1).sum() == 15  # unlabelled nodes survive as -1


@pytest.fixture
def cora(real_datasets) -> dict:
    return dict(np.load(real_datasets / "cora.npz"))


def _save(tmp_path, arrays) -> Path:
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return path


def _break_symmetry(a):
    a["indices"] = a["indices"].copy()
    a["indices"][0] = (a["indices"][0] + 1) if a["indices"][1] != a["indices"][0] + 1 else a["indices"][0] - 1
    a["indices"][: a["indptr"][1]] = np.sort(a["indices"][: a["indptr"][1]])


BAD = {
    "missing member": (lambda a: a.pop("features"), "missing array 'features'"),
    "float indices": (lambda a: a.update(indices=a["indices"].astype(np.float64)), "[indices]: indices must be integers"),
    "id out of range": (lambda a: a["indices"].__setitem__(5, 99_999), "out of range"),
    "unsorted neighbours": (lambda a: a["indices"].__setitem__(slice(0, 3), a["indices"][:3][::-1].copy()),
                            "not sorted"),
    "asymmetric": (_break_symmetry, "not symmetric"),
    "nan feature": (lambda a: a["features"].__setitem__((7, 3), np.nan), "[features]: feature of node 7, column 3 is nan"),
    "features wrong rows": (lambda a: a.update(features=a["features"][:-1]), "rows but 2708 nodes"),
    "features 1-D": (lambda a: a.update(features=a["features"][:, 0]), "must be 2-D"),
    "float labels": (lambda a: a.update(labels=a["labels"].astype(np.float32)), "[labels]: labels must be integers"),
    "overlapping masks": (lambda a: a["val_mask"].__setitem__(0, True), "[val_mask]: node 0 is also in an earlier split"),
    "mask wrong length": (lambda a: a.update(test_mask=a["test_mask"][:-2]), "[test_mask]: a boolean split mask must have"),
    "unlabelled train node": (lambda a: a["labels"].__setitem__(0, -1), "[train_mask]: node 0 has no label"),
    "no split": (lambda a: a.pop("test_mask"), "missing the split"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_npz_names_file_and_fault(tmp_path, cora, case):
    mutate, message = BAD[case]
    mutate(cora)
    path = _save(tmp_path, cora)
    with pytest.raises(DatasetError) as err:
        import_npz(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_symmetrize_repairs_an_asymmetric_unsorted_adjacency(tmp_path, cora):
    _break_symmetry(cora)
    cora["indices"][:3] = cora["indices"][:3][::-1].copy()
    data = import_npz(_save(tmp_path, cora), symmetrize=True)
    assert data["indices"].size >= cora["indices"].size
    write_dataset(tmp_path / "fixed", **data)
    open_dataset(tmp_path / "fixed", verify=True)


def test_missing_truncated_and_pickled_files(tmp_path, real_datasets, cora):
    with pytest.raises(DatasetError, match="nope.npz: file not found"):
        import_npz(tmp_path / "nope.npz")
    cut = tmp_path / "cut.npz"
    cut.write_bytes((real_datasets / "cora.npz").read_bytes()[:5000])
    with pytest.raises(DatasetError, match="cut.npz: not a readable npz archive"):
        import_npz(cut)
    cora["labels"] = np.array([{"a": 1}] * 2708, dtype=object)
    with pytest.raises(DatasetError, match=r"bad.npz\[labels\]: holds pickled \(object\) data"):
        import_npz(_save(tmp_path, cora))
