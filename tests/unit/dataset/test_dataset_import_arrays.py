"""Importing raw .npy arrays: a directory of files, split forms, and every bad input."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.arrays import find_array_files, import_arrays
from saintpipe.services.dataset.store import open_dataset, write_dataset


def _dump(directory, tiny, split_form="ids"):
    directory.mkdir(exist_ok=True)
    for role in ("indptr", "indices", "features", "labels"):
        np.save(directory / f"{role}.npy", tiny[role])
    n = tiny["labels"].size
    if split_form == "ids":
        for k, ids in tiny["splits"].items():
            np.save(directory / f"{k}.npy", ids.astype(np.int32))
    elif split_form == "masks":
        for k, ids in tiny["splits"].items():
            mask = np.zeros(n, dtype=bool)
            mask[ids] = True
            np.save(directory / f"{k}_mask.npy", mask)
    else:
        codes = np.full(n, -1, dtype=np.int8)
        for code, k in enumerate(("train", "val", "test")):
            codes[tiny["splits"][k]] = code
        np.save(directory / "split.npy", codes)
    return directory


@pytest.mark.parametrize("split_form", ["ids", "masks", "codes"])
def test_round_trip_import_verify_load(tmp_path, tiny, split_form):
    src = _dump(tmp_path / "arrays", tiny, split_form)
    data = import_arrays(find_array_files(src), name="tiny")
    write_dataset(tmp_path / "ds", num_shards=4, **data)
    ds = open_dataset(tmp_path / "ds", verify=True)
    assert np.array_equal(ds.indptr, tiny["indptr"]) and np.array_equal(ds.indices, tiny["indices"])
    assert np.array_equal(ds.features(), tiny["features"]) and np.array_equal(ds.labels, tiny["labels"])
    for k in ("train", "val", "test"):
        assert np.array_equal(ds.splits[k], tiny["splits"][k])


def test_integer_types_are_widened_safely(tmp_path, tiny):
    src = _dump(tmp_path / "arrays", tiny)
    np.save(src / "indices.npy", tiny["indices"].astype(np.int64))
    np.save(src / "labels.npy", tiny["labels"].astype(np.int16))
    np.save(src / "features.npy", (tiny["features"] > 0).astype(np.int8))
    data = import_arrays(find_array_files(src), name="t")
    assert data["indices"].dtype == np.int32 and data["labels"].dtype == np.int64
    assert data["features"].dtype == np.float32


def _unsorted(tiny):
    indices = tiny["indices"].copy()
    row = int(np.argmax(np.diff(tiny["indptr"])))
    a = tiny["indptr"][row]
    indices[a], indices[a + 1] = indices[a + 1], indices[a]
    return indices


BAD = {
    "float indptr": ("indptr", lambda t: t["indptr"].astype(np.float64), "indptr must be integers"),
    "2-D indices": ("indices", lambda t: t["indices"].reshape(-1, 2), "indices must be 1-D"),
    "id out of range": ("indices", lambda t: np.where(np.arange(t["indices"].size) == 3, 40, t["indices"]).astype(np.int32),
                        "neighbour id 40 of node"),
    "negative id": ("indices", lambda t: np.where(np.arange(t["indices"].size) == 3, -2, t["indices"]),
                    "neighbour id -2 of node 0 is out of range"),
    "id beyond int32": ("indices", lambda t: np.where(np.arange(t["indices"].size) == 3, np.int64(2**33), t["indices"].astype(np.int64)),
                        "neighbour id 8589934592 at position 3 does not fit"),
    "unsorted": ("indices", _unsorted, "is not sorted ascending"),
    "indptr short": ("indptr", lambda t: t["indptr"][:-1], "indptr[-1]"),
    "nan feature": ("features", lambda t: np.where(np.arange(40)[:, None] == 9, np.nan, t["features"]).astype(np.float32),
                    "feature of node 9, column 0 is nan"),
    "inf feature": ("features", lambda t: np.full_like(t["features"], np.inf), "is inf"),
    "string features": ("features", lambda t: t["features"].astype(str), "features must be numbers"),
    "label below -1": ("labels", lambda t: np.full(40, -3), "label of node 0 is -3"),
    "labels wrong length": ("labels", lambda t: t["labels"][:10], "labels must have 40 rows"),
    "split id out of range": ("train", lambda t: np.array([0, 77]), "node id 77 is out of range"),
    "split repeats an id": ("train", lambda t: np.array([0, 0]), "more than once"),
    "float split": ("val", lambda t: t["splits"]["val"].astype(np.float32), "split must be 1-D integer node ids"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arrays_name_the_file(tmp_path, tiny, case):
    role, make, message = BAD[case]
    src = _dump(tmp_path / "arrays", tiny)
    np.save(src / f"{role}.npy", make(tiny))
    with pytest.raises(DatasetError) as err:
        import_arrays(find_array_files(src), name="t")
    assert f"{role}.npy" in str(err.value) and message in str(err.value)


def test_asymmetric_adjacency_is_refused_then_repaired_on_request(tmp_path, tiny):
    src = _dump(tmp_path / "arrays", tiny)
    # Keep only edges (u, v) with u < v: sorted but one-directional.
    rows = np.repeat(np.arange(40), np.diff(tiny["indptr"]))
    keep = rows < tiny["indices"]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=40))]).astype(np.int64)
    np.save(src / "indptr.npy", indptr)
    np.save(src / "indices.npy", tiny["indices"][keep])
    with pytest.raises(DatasetError, match=r"indices.npy: adjacency is not symmetric: edge \(\d+, \d+\) has no reverse"):
        import_arrays(find_array_files(src), name="t")
    data = import_arrays(find_array_files(src), name="t", symmetrize=True)
    assert np.array_equal(data["indices"], tiny["indices"]) and np.array_equal(data["indptr"], tiny["indptr"])


def test_missing_truncated_and_pickled_files(tmp_path, tiny):
    src = _dump(tmp_path / "arrays", tiny)
    (src / "labels.npy").unlink()
    with pytest.raises(DatasetError, match="labels.npy: file not found"):
        import_arrays(find_array_files(src), name="t")
    np.save(src / "labels.npy", tiny["labels"])
    raw = (src / "features.npy").read_bytes()
    (src / "features.npy").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DatasetError, match=r"features.npy: truncated: its header declares a 40 x 5 float32 array"):
        import_arrays(find_array_files(src), name="t")
    np.save(src / "features.npy", np.array([object()] * 40, dtype=object), allow_pickle=True)
    with pytest.raises(DatasetError, match=r"features.npy: holds pickled \(object\) data"):
        import_arrays(find_array_files(src), name="t")
    (src / "test.npy").unlink()
    np.save(src / "features.npy", tiny["features"])
    with pytest.raises(DatasetError, match="test.npy: file not found"):
        import_arrays(find_array_files(src), name="t")


def test_bad_split_codes(tmp_path, tiny):
    src = _dump(tmp_path / "arrays", tiny, "codes")
    codes = np.load(src / "split.npy")
    codes[4] = 7
    np.save(src / "split.npy", codes)
    with pytest.raises(DatasetError, match="split.npy: node 4 has split code 7"):
        import_arrays(find_array_files(src), name="t")
