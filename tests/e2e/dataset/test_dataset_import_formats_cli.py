"""``saintpipe data import`` of each format through the real console script (issue 22, point 2).

Round trips of GraphSAINT's format (its training graph kept) and OGB's raw
layout built from cora, format detection, the old ``import FORMAT PATH`` form,
edge lists with and without ``--string-ids``, and one-line errors naming the
file and line (or key) for bad inputs, with nothing written.
"""

from __future__ import annotations

import gzip
import json
import zipfile

import numpy as np
import pytest

from saintpipe.services.dataset.layout import TRAIN_GRAPH_FILES
from tests.support.formats import induced, write_graphsaint, write_ogb

pytestmark = pytest.mark.timeout(240)


def _one_line_error(r, expected: str) -> str:
    err = r.stderr.strip()
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "\n" not in err, err
    assert expected in err, err
    return err


def test_graphsaint_round_trip_detected_and_verified(cli, tmp_path, real_datasets):
    src = write_graphsaint(real_datasets / "cora.npz", tmp_path / "cora-saint")
    out = tmp_path / "ds"
    r = cli("data", "import", str(tmp_path / "cora-saint"), "--out", str(out), "--shards", "2")
    assert "wrote" in r.stdout and "2,708 nodes, 10,556 directed edges, 2 feature shard(s)" in r.stdout
    assert "training graph: 140 nodes, 42 directed edges" in r.stdout
    assert json.loads((out / "manifest.json").read_text())["sample_graph"] == "train"
    want_indptr, want_indices = induced(src["indptr"], src["indices"], src["train"])
    assert np.array_equal(np.load(out / TRAIN_GRAPH_FILES["nodes"]), src["train"])
    assert np.array_equal(np.load(out / TRAIN_GRAPH_FILES["indptr"]), want_indptr)
    assert np.array_equal(np.load(out / TRAIN_GRAPH_FILES["indices"]), want_indices)
    assert "OK (2,708 nodes, 10,556 directed edges, 2 shard(s), 11 checksums match)" in cli("data", "verify", str(out)).stdout


def test_graphsaint_bad_file_is_one_line_and_writes_nothing(cli, tmp_path, real_datasets):
    saint = tmp_path / "saint"
    write_graphsaint(real_datasets / "cora.npz", saint)
    roles = json.loads((saint / "role.json").read_text())
    roles["te"].append(roles["tr"][5])
    (saint / "role.json").write_text(json.dumps(roles))
    r = cli("data", "import", "graphsaint", str(saint), "--out", str(tmp_path / "ds"), check=False)
    _one_line_error(r, f"{saint / 'role.json'}['te']: node {roles['tr'][5]} is also in an earlier split")
    assert not (tmp_path / "ds").exists()


def test_ogb_round_trip_with_split_name(cli, tmp_path, real_datasets):
    write_ogb(real_datasets / "cora.npz", tmp_path / "ogbn_cora", split_names=("random", "time"))
    out = tmp_path / "ds"
    r = cli("data", "import", str(tmp_path / "ogbn_cora"), "--out", str(out), check=False)
    _one_line_error(r, "holds several splits (random, time); pick one with --split-name")
    r = cli("data", "import", str(tmp_path / "ogbn_cora"), "--split-name", "time", "--out", str(out))
    assert "2,708 nodes, 10,556 directed edges" in r.stdout
    assert "OK (2,708 nodes" in cli("data", "verify", str(out)).stdout
    assert "split time" in json.loads((out / "manifest.json").read_text())["source"]


def test_ogb_bad_line_is_named(cli, tmp_path, real_datasets):
    ogb = tmp_path / "ogb"
    write_ogb(real_datasets / "cora.npz", ogb)
    edges = gzip.decompress((ogb / "raw" / "edge.csv.gz").read_bytes()).decode().splitlines()
    edges[4999] = "12;13"
    (ogb / "raw" / "edge.csv.gz").write_bytes(gzip.compress(("\n".join(edges) + "\n").encode()))
    r = cli("data", "import", "--format", "ogb", str(ogb), "--out", str(tmp_path / "ds"), check=False)
    _one_line_error(r, f"{ogb / 'raw' / 'edge.csv.gz'}, line 5000, column 1: '12;13' is not an integer")
    assert not (tmp_path / "ds").exists()


def test_edge_list_ids_are_integers_unless_string_ids(cli, tmp_path):
    edges = tmp_path / "g.tsv"
    edges.write_text("from\tto\n1\t2\n2\tthree\n")
    r = cli("data", "import", str(edges), "--out", str(tmp_path / "ds"), check=False)
    _one_line_error(r, f"{edges}, line 3, column 2: node id 'three' is not an integer "
                       "(ids are integers unless you give --string-ids)")
    cli("data", "import", str(edges), "--string-ids", "--out", str(tmp_path / "ds"))
    assert np.load(tmp_path / "ds" / "node_ids.npy").tolist() == ["1", "2", "three"]


@pytest.mark.parametrize("name,content,message", [
    ("rand.npz", bytes(range(7, 250)), "rand.npz: not an .npz file (not a zip archive)"),
    ("text.npz", b"indptr,indices\n", "text.npz: not an .npz file (not a zip archive)"),
    ("notes.npz", None, "notes.npz[notes.txt]: not a .npy array (no .npy magic string)"),
    ("partial.npz", "partial", "partial.npz: missing array 'features' (the archive holds indices, indptr)"),
])
def test_garbage_npz_is_reported_as_what_it_is(cli, tmp_path, name, content, message):
    path = tmp_path / name
    if content is None:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("notes.txt", "hello")
    elif content == "partial":
        np.savez(path, indptr=np.array([0, 1]), indices=np.array([0]))
    else:
        path.write_bytes(content)
    r = cli("data", "import", str(path), "--out", str(tmp_path / "ds"), check=False)
    _one_line_error(r, message)


def test_generate_shards_beyond_nodes_names_the_flag(cli, tmp_path):
    r = cli("data", "generate", "demo", "--nodes", "1", "--out", str(tmp_path / "ds"), check=False)
    _one_line_error(r, "--shards 2: the dataset has 1 node(s), so at most 1 feature shard(s)")
