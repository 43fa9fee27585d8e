"""verify_dataset: every way a dataset directory can be broken is caught and names the file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.dataset.verify import verify_dataset


def test_a_good_dataset_verifies(tiny_dataset):
    m = verify_dataset(tiny_dataset)
    assert m.num_nodes == 40 and m.num_shards == 2
    assert open_dataset(tiny_dataset, verify=True).num_nodes == 40


def test_corrupted_file_fails_its_checksum(tiny_dataset):
    shard = tiny_dataset / "features" / "shard-00001.npy"
    raw = bytearray(shard.read_bytes())
    raw[-1] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match="shard-00001.npy: checksum mismatch"):
        verify_dataset(tiny_dataset)
    verify_dataset(tiny_dataset, checksums=False)  # the content itself is still a valid float


def test_missing_file(tiny_dataset):
    (tiny_dataset / "split" / "val.npy").unlink()
    with pytest.raises(DatasetError, match=r"split/val.npy: file not found"):
        verify_dataset(tiny_dataset)
    with pytest.raises(DatasetError, match=r"split/val.npy: file not found"):
        open_dataset(tiny_dataset)


def test_missing_manifest_and_directory(tmp_path, tiny_dataset):
    with pytest.raises(DatasetError, match="dataset directory not found"):
        verify_dataset(tmp_path / "nothing")
    (tiny_dataset / "manifest.json").unlink()
    with pytest.raises(DatasetError, match="manifest.json: manifest not found"):
        verify_dataset(tiny_dataset)


def _edit_manifest(directory, **changes):
    path = directory / "manifest.json"
    m = json.loads(path.read_text())
    m.update(changes)
    path.write_text(json.dumps(m))
    return m


def test_manifest_from_a_newer_format(tiny_dataset):
    _edit_manifest(tiny_dataset, format_version=99)
    with pytest.raises(DatasetError, match="format_version 99 is newer than this saintpipe reads"):
        open_dataset(tiny_dataset)


def test_manifest_problems(tiny_dataset):
    m = _edit_manifest(tiny_dataset, shards=[[0, 10], [12, 40]])
    with pytest.raises(DatasetError, match=r"manifest.json: shard 1 covers \[12, 40\)"):
        verify_dataset(tiny_dataset, checksums=False)
    m["files"]["../evil.npy"] = "0" * 64
    _edit_manifest(tiny_dataset, shards=[[0, 20], [20, 40]], files=m["files"])
    with pytest.raises(DatasetError, match="points outside the dataset"):
        verify_dataset(tiny_dataset)
    del m["files"]["../evil.npy"], m["files"]["labels.npy"]
    _edit_manifest(tiny_dataset, files=m["files"])
    with pytest.raises(DatasetError, match="lists no checksum for required file labels.npy"):
        verify_dataset(tiny_dataset)
    (tiny_dataset / "manifest.json").write_text("{not json")
    with pytest.raises(DatasetError, match="manifest.json: not valid JSON"):
        verify_dataset(tiny_dataset)


def test_truncated_npy(tiny_dataset, rewrite_file):
    raw = (tiny_dataset / "indices.npy").read_bytes()
    rewrite_file(tiny_dataset, "indices.npy", raw=raw[: len(raw) - 40])
    with pytest.raises(DatasetError, match="indices.npy: not a readable .npy file .*truncated"):
        verify_dataset(tiny_dataset)


def _swap_first_pair(d):
    i = d.indices.copy()
    row = int(np.argmax(np.diff(d.indptr)))
    a = d.indptr[row]
    i[a], i[a + 1] = i[a + 1], i[a]
    return i


CONTENT = {
    "indices int64": ("indices.npy", lambda d: d.indices.astype(np.int64), "indices.npy: dtype int64, expected int32"),
    "indptr wrong shape": ("indptr.npy", lambda d: np.append(d.indptr, d.indptr[-1]), "indptr.npy: shape (42,)"),
    "unsorted": ("indices.npy", _swap_first_pair, "is not sorted ascending"),
    "out of range": ("indices.npy", lambda d: np.where(np.arange(d.indices.size) == 0, 41, d.indices).astype(np.int32),
                     "neighbour id 41 of node 0 is out of range"),
    "nan feature": ("features/shard-00001.npy",
                    lambda d: np.where(np.arange(20)[:, None] == 2, np.nan, d.feature_shard(1)).astype(np.float32),
                    "shard-00001.npy: feature of node 22, column 0 is nan"),
    "float16 shard in float32 dataset": ("features/shard-00000.npy", lambda d: d.feature_shard(0).astype(np.float16),
                                         "shard-00000.npy: dtype float16, expected float32"),
    "labels float": ("labels.npy", lambda d: d.labels.astype(np.float64), "labels.npy: dtype float64, expected int64"),
    "label beyond classes": ("labels.npy", lambda d: np.where(np.arange(40) == 5, 9, d.labels),
                             "labels.npy: holds 10 classes"),
    "split overlap": ("split/test.npy", lambda d: np.concatenate([d.splits["test"], d.splits["train"][:1]]),
                      "split/test.npy: node"),
    "split int32": ("split/val.npy", lambda d: d.splits["val"].astype(np.int32), "val.npy: must be 1-D int64"),
    "unlabelled split node": ("labels.npy", lambda d: np.where(np.arange(40) == d.splits["val"][0], -1, d.labels),
                              "has no label (-1)"),
}


@pytest.mark.parametrize("case", sorted(CONTENT))
def test_content_problems_behind_valid_checksums(tiny_dataset, rewrite_file, case):
    rel, make, message = CONTENT[case]
    d = open_dataset(tiny_dataset)
    rewrite_file(tiny_dataset, rel, array=np.ascontiguousarray(make(d)))
    with pytest.raises(DatasetError) as err:
        verify_dataset(tiny_dataset)
    assert message in str(err.value)


def test_asymmetric_adjacency(tiny_dataset, rewrite_file):
    d = open_dataset(tiny_dataset)
    # Drop the last neighbour of node 0 (and only that direction).
    end = int(d.indptr[1])
    indptr = d.indptr.copy()
    indptr[1:] -= 1
    indices = np.delete(d.indices, end - 1)
    _edit_manifest(tiny_dataset, num_edges=int(indices.size))
    rewrite_file(tiny_dataset, "indptr.npy", array=indptr)
    rewrite_file(tiny_dataset, "indices.npy", array=indices)
    with pytest.raises(DatasetError, match=r"indices.npy: adjacency is not symmetric: edge \(\d+, 0\) has no reverse"):
        verify_dataset(tiny_dataset)
