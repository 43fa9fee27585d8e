"""write_dataset never leaves a half-written dataset and never damages an existing one."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import store
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.dataset.verify import verify_dataset


def _leftovers(parent):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_invalid_arrays_write_nothing(tmp_path, make_tiny):
    bad = make_tiny()
    bad["features"][3, 1] = np.nan
    with pytest.raises(DatasetError, match="feature of node 3, column 1 is nan"):
        write_dataset(tmp_path / "ds", **bad)
    assert list(tmp_path.iterdir()) == []


def test_failure_midway_removes_the_temporary_directory(tmp_path, make_tiny, monkeypatch):
    calls = []

    def failing_save(directory, rel, array):
        calls.append(rel)
        if rel.startswith("features/"):
            raise OSError("disk full")
        np.save(directory / rel if "/" not in rel else _mk(directory, rel), array)

    def _mk(directory, rel):
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        return directory / rel

    monkeypatch.setattr(store, "_save", failing_save)
    with pytest.raises(DatasetError, match=r"ds: cannot write: disk full$"):
        write_dataset(tmp_path / "ds", **make_tiny())
    assert "indptr.npy" in calls  # it really got midway
    assert list(tmp_path.iterdir()) == []


def test_existing_dataset_survives_a_failed_overwrite(tmp_path, tiny_dataset, make_tiny, monkeypatch):
    before = open_dataset(tiny_dataset).features().copy()
    monkeypatch.setattr(store, "write_manifest", lambda *a: (_ for _ in ()).throw(OSError("boom")))
    with pytest.raises(DatasetError, match=r"tiny: cannot write: boom$"):
        write_dataset(tiny_dataset, overwrite=True, **make_tiny(seed=9))
    verify_dataset(tiny_dataset)
    assert np.array_equal(open_dataset(tiny_dataset).features(), before)
    assert _leftovers(tiny_dataset.parent) == []


def test_overwrite_needs_force_and_replaces_when_given(tmp_path, tiny_dataset, make_tiny):
    with pytest.raises(DatasetError, match="already exists; choose another --out or pass --force"):
        write_dataset(tiny_dataset, **make_tiny(seed=9))
    other = make_tiny(seed=9)
    write_dataset(tiny_dataset, overwrite=True, **other)
    assert np.array_equal(open_dataset(tiny_dataset, verify=True).features(), other["features"])
    assert _leftovers(tiny_dataset.parent) == []


def test_float16_storage_and_overflow(tmp_path, make_tiny):
    data = make_tiny()
    write_dataset(tmp_path / "half", feature_dtype="float16", **data)
    ds = open_dataset(tmp_path / "half", verify=True)
    assert ds.features().dtype == np.float16
    np.testing.assert_allclose(ds.features(), data["features"], rtol=1e-3, atol=1e-3)
    data["features"][7, 2] = 1e6
    with pytest.raises(DatasetError, match="features as float16: feature of node 7, column 2 is inf"):
        write_dataset(tmp_path / "overflow", feature_dtype="float16", **data)
    assert not (tmp_path / "overflow").exists()
