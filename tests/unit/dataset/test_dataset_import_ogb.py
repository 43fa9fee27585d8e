"""Importing OGB's raw node property prediction layout, and the chunked CSV reader under it."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers import csv_tables
from saintpipe.services.dataset.importers.csv_tables import MISSING, read_float_table, read_int_table
from saintpipe.services.dataset.importers.ogb import import_ogb
from saintpipe.services.dataset.store import open_dataset, write_dataset
from tests.support.formats import write_ogb


def _gz(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    return path


@pytest.fixture
def ogb_dir(tmp_path, real_datasets):
    directory = tmp_path / "ogbn_cora"
    write_ogb(real_datasets / "cora.npz", directory)
    return directory


def test_round_trip_symmetrizes_edges(tmp_path, real_datasets):
    unlabelled = (640, 641, 1000)  # in no split; one empty line, one "nan", one empty line
    directory = tmp_path / "ogbn_cora"
    src = write_ogb(real_datasets / "cora.npz", directory, unlabelled=unlabelled)
    data = import_ogb(directory)
    assert np.array_equal(data["indptr"], src["indptr"]) and np.array_equal(data["indices"], src["indices"])
    assert np.array_equal(data["features"], src["features"])
    want = src["labels"].copy()
    want[list(unlabelled)] = -1
    assert np.array_equal(data["labels"], want)
    assert all(np.array_equal(data["splits"][s], src[s]) for s in ("train", "val", "test"))
    assert data["name"] == "ogbn_cora" and "split random" in data["source"]
    write_dataset(tmp_path / "ds", **data)
    assert open_dataset(tmp_path / "ds", verify=True).manifest.sample_graph == "full"


def test_split_name_picks_one_of_several(tmp_path, real_datasets):
    directory = tmp_path / "ogb"
    write_ogb(real_datasets / "cora.npz", directory, split_names=("time", "random"))
    with pytest.raises(DatasetError, match=r"split: holds several splits \(random, time\); pick one with --split-name"):
        import_ogb(directory)
    assert "split time" in import_ogb(directory, split_name="time")["source"]
    with pytest.raises(DatasetError, match=r"no split 'species' \(--split-name\); there is random, time"):
        import_ogb(directory, split_name="species")


def test_multilabel_and_no_features(tmp_path):
    d = tmp_path / "proteins"
    _gz(d / "raw" / "edge.csv.gz", "0,1\n1,2\n2,0\n2,3\n")
    _gz(d / "raw" / "node-label.csv.gz", "1,0,1\n0,0,0\n0,1,0\n1,1,1\n")
    for name, ids in (("train", "0\n1\n"), ("valid", "2\n"), ("test", "3\n")):
        _gz(d / "split" / "species" / f"{name}.csv.gz", ids)
    data = import_ogb(d)
    assert data["labels"].dtype == np.uint8 and data["labels"].tolist()[0] == [1, 0, 1]
    assert data["features"].shape == (4, 2)  # [1, log(1 + degree)]
    np.testing.assert_allclose(data["features"][:, 1], np.log1p([2, 2, 3, 1]), rtol=1e-6)


def _tiny_ogb(d, **replace):
    files = {
        "raw/edge.csv.gz": "0,1\n1,2\n2,3\n",
        "raw/node-feat.csv.gz": "0.5,1\n1.5,2\n2.5,3\n3.5,4\n",
        "raw/node-label.csv.gz": "0\n1\n0\n1\n",
        "raw/num-node-list.csv.gz": "4\n",
        "split/s/train.csv.gz": "0\n1\n",
        "split/s/valid.csv.gz": "2\n",
        "split/s/test.csv.gz": "3\n",
    }
    files.update(replace)
    for rel, text in files.items():
        if text is not None:
            _gz(d / rel, text)
    return d


BAD = {
    "edge not an integer": ({"raw/edge.csv.gz": "0,1\n1,x2\n"}, "raw/edge.csv.gz, line 2, column 2: 'x2' is not an integer"),
    "edge one field": ({"raw/edge.csv.gz": "0,1\n1\n"}, "raw/edge.csv.gz, line 2: 1 field(s), expected 2"),
    "edge empty line": ({"raw/edge.csv.gz": "0,1\n\n1,2\n"}, "raw/edge.csv.gz, line 2: empty line"),
    "edge id out of range": ({"raw/edge.csv.gz": "0,1\n1,2\n2,4\n"},
                             "raw/edge.csv.gz, line 3: node id 4 is out of range: "),
    "edge negative id": ({"raw/edge.csv.gz": "0,1\n-1,2\n"}, "raw/edge.csv.gz, line 2: node id -1 is not in"),
    "feature not a number": ({"raw/node-feat.csv.gz": "0.5,1\n1.5,abc\n2.5,3\n3.5,4\n"},
                             "raw/node-feat.csv.gz, line 2, column 2: 'abc' is not a number"),
    "feature row short": ({"raw/node-feat.csv.gz": "0.5,1\n1.5,2\n2.5\n3.5,4\n"},
                          "raw/node-feat.csv.gz, line 3: 1 field(s), expected 2"),
    "feature rows": ({"raw/node-feat.csv.gz": "0.5,1\n1.5,2\n2.5,3\n"},
                     "raw/node-feat.csv.gz: 3 lines, but"),
    "label fraction": ({"raw/node-label.csv.gz": "0\n1.5\n0\n1\n"},
                       "raw/node-label.csv.gz, line 2, column 1: '1.5' is not an integer (it has a fractional part)"),
    "label negative": ({"raw/node-label.csv.gz": "0\n-3\n0\n1\n"}, "raw/node-label.csv.gz, line 2: label -3"),
    "labels rows": ({"raw/node-label.csv.gz": "0\n1\n0\n1\n1\n"}, "raw/node-label.csv.gz: 5 lines, but"),
    "node count lines": ({"raw/num-node-list.csv.gz": "4\n5\n"}, "num-node-list.csv.gz: lists 2 graphs"),
    "split id out of range": ({"split/s/test.csv.gz": "3\n9\n"}, "split/s/test.csv.gz, line 2: node id 9 is out of range"),
    "split not an id": ({"split/s/valid.csv.gz": "2\nfoo\n"}, "split/s/valid.csv.gz, line 2, column 1: 'foo' is not an integer"),
    "unlabelled node in a split": ({"raw/node-label.csv.gz": "0\n1\nnan\n1\n"},
                                   "split/s/valid.csv.gz: node 2 has no label (-1) but is in the val split"),
    "missing labels": ({"raw/node-label.csv.gz": None}, "raw/node-label.csv.gz: file not found"),
    "missing test split": ({"split/s/test.csv.gz": None}, "split/s/test.csv.gz: file not found"),
    "not gzip": ({}, "raw/edge.csv.gz: not a readable gzip file"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_ogb_files_name_file_and_line(tmp_path, case):
    replace, message = BAD[case]
    d = _tiny_ogb(tmp_path / "ogb", **replace)
    if case == "not gzip":
        (d / "raw" / "edge.csv.gz").write_text("0,1\n")
    with pytest.raises(DatasetError) as err:
        import_ogb(d)
    assert message in str(err.value)


def test_heterogeneous_and_non_ogb_directories(tmp_path):
    (tmp_path / "mag" / "raw" / "relations").mkdir(parents=True)
    with pytest.raises(DatasetError, match=r"mag: a heterogeneous OGB dataset \(raw/relations/, as ogbn-mag\)"):
        import_ogb(tmp_path / "mag")
    with pytest.raises(DatasetError, match=r"empty: no raw/ directory"):
        (tmp_path / "empty").mkdir()
        import_ogb(tmp_path / "empty")


def test_int_reader_across_blocks_counts_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_tables, "CHUNK_BYTES", 64)  # many blocks, lines cut at block ends
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, 10**6, size=(500, 2))
    lines = [f"{u},{v}" for u, v in pairs]
    path = tmp_path / "e.csv"
    path.write_text("\r\n".join(lines))  # CRLF, no newline at the end
    assert np.array_equal(read_int_table(path, 2, dtype=np.int32), pairs)
    lines[377] = "5,7;"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"e.csv, line 378, column 2: '7;' is not an integer"):
        read_int_table(path, 2)


def test_int_reader_missing_values_and_limits(tmp_path):
    path = tmp_path / "y.csv"
    path.write_text("3\n\nNaN\n 4.00 \n-1\n")
    assert read_int_table(path, 1, allow_missing=True)[:, 0].tolist() == [3, MISSING, MISSING, 4, -1]
    with pytest.raises(DatasetError, match=r"y.csv, line 2: empty line"):
        read_int_table(path, 1)
    path.write_text("1,12345678901234567890\n")
    with pytest.raises(DatasetError, match=r"line 1, column 2: '12345678901234567890' is too large"):
        read_int_table(path, 2)
    path.write_text("1,nan\n")
    with pytest.raises(DatasetError, match=r"line 1, column 2: no value \('nan'\) where an integer is required"):
        read_int_table(path, 2)


def test_float_reader_blocks_and_blank_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_tables, "CHUNK_BYTES", 50)
    x = np.random.default_rng(2).normal(size=(40, 3)).astype(np.float32)
    path = tmp_path / "x.csv"
    path.write_text("".join(",".join(repr(float(v)) for v in row) + "\n" for row in x))
    assert np.array_equal(read_float_table(path, 3), x)
    lines = path.read_text().splitlines()
    lines.insert(30, "")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"x.csv, line 31: empty line \(expected 3 numbers\)"):
        read_float_table(path, 3)
