"""``data import PATH``: which format a path is, and the one-line error when it is none."""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pytest

from saintpipe.cli import build_parser
from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.detect import detect_format


def test_each_layout_is_detected(tmp_path, real_datasets):
    (tmp_path / "saint").mkdir()
    (tmp_path / "saint" / "adj_full.npz").write_bytes(b"")
    (tmp_path / "ogb" / "raw").mkdir(parents=True)
    (tmp_path / "ogb" / "raw" / "edge.csv.gz").write_bytes(b"")
    (tmp_path / "arrays").mkdir()
    np.save(tmp_path / "arrays" / "indptr.npy", np.zeros(2, dtype=np.int64))
    shutil.copy(real_datasets / "cora.npz", tmp_path / "cora.data")  # a zip whatever its name
    (tmp_path / "edges.txt").write_text("1 2\n")
    (tmp_path / "edges").write_text("1,2\n")
    expected = {"saint": "graphsaint", "ogb": "ogb", "arrays": "arrays", "cora.data": "npz", "edges.txt": "edgelist",
                "edges": "edgelist"}
    assert {name: detect_format(tmp_path / name) for name in expected} == expected
    assert detect_format(real_datasets / "cora.npz") == "npz"


def test_what_is_not_detected_says_what_was_looked_for(tmp_path):
    with pytest.raises(DatasetError, match=r"nowhere: file or directory not found$"):
        detect_format(tmp_path / "nowhere")
    with pytest.raises(DatasetError) as err:
        detect_format(tmp_path)
    assert str(err.value) == (f"{tmp_path}: cannot tell the dataset format: the directory holds none of adj_full.npz "
                              "(graphsaint), raw/edge.csv.gz (ogb), indptr.npy (arrays); give --format")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)))
    with pytest.raises(DatasetError, match=r"blob.bin: cannot tell the dataset format \(a binary file\); expected a "
                                           r"GraphSAINT directory \(adj_full.npz\), an OGB directory"):
        detect_format(tmp_path / "blob.bin")
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(DatasetError, match=r"empty.csv: cannot tell the dataset format \(an empty file\)"):
        detect_format(tmp_path / "empty.csv")
    with gzip.open(tmp_path / "e.csv.gz", "wt") as fh:
        fh.write("1,2\n")
    with pytest.raises(DatasetError, match=r"e.csv.gz: gzip-compressed; decompress it first"):
        detect_format(tmp_path / "e.csv.gz")
    np.save(tmp_path / "x.npy", np.zeros(3))
    with pytest.raises(DatasetError, match=r"x.npy: a single .npy array; give the directory"):
        detect_format(tmp_path / "x.npy")


def test_parser_forms_reach_the_format_parsers(tmp_path, real_datasets):
    """``import FORMAT PATH``, ``import PATH`` (detected) and ``--format`` before or after PATH parse alike."""
    cora = str(real_datasets / "cora.npz")
    parse = build_parser().parse_args
    forms = (["npz", cora], [cora], ["--format", "npz", cora], [cora, "--format", "npz"], [cora, "--format=npz"])
    for form in forms:
        args = parse(["data", "import", *form, "--out", "o", "--symmetrize"])
        assert (args.importer, str(args.file), args.symmetrize, args.func.__name__) == ("npz", cora, True, "_import_npz")
    (tmp_path / "g.tsv").write_text("a\tb\n")
    args = parse(["data", "import", str(tmp_path / "g.tsv"), "--string-ids", "--out", "o"])
    assert args.importer == "edgelist" and args.string_ids
    args = parse(["data", "import", "ogb", str(tmp_path), "--split-name", "time", "--out", "o"])
    assert args.importer == "ogb" and args.split_name == "time"


@pytest.mark.parametrize("argv,message", [
    (["--format", "ogb", "npz", "x.npz"], "--format ogb contradicts the format 'npz' named before the path"),
    (["x.npz", "--format", "csv"], "argument --format: invalid choice: 'csv'"),
    (["missing.npz"], "missing.npz: file or directory not found"),
])
def test_parser_errors_are_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["data", "import", *argv, "--out", "o"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith("saintpipe data import: error: ") and message in err
