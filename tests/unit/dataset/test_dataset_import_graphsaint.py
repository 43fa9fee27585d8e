"""Importing GraphSAINT's format: the round trip from cora, the kept training graph, and one bad file each."""

from __future__ import annotations

import json

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.graphsaint import import_graphsaint
from saintpipe.services.dataset.layout import TRAIN_GRAPH_FILES
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.dataset.verify import verify_dataset
from tests.support.formats import induced, write_graphsaint


@pytest.fixture
def saint_dir(tmp_path, real_datasets):
    directory = tmp_path / "cora-saint"
    write_graphsaint(real_datasets / "cora.npz", directory)
    return directory


def test_round_trip_keeps_the_training_graph(tmp_path, real_datasets, saint_dir):
    src = write_graphsaint(real_datasets / "cora.npz", saint_dir)
    data = import_graphsaint(saint_dir)
    assert np.array_equal(data["indptr"], src["indptr"]) and np.array_equal(data["indices"], src["indices"])
    assert np.array_equal(data["features"], src["features"]) and np.array_equal(data["labels"], src["labels"])
    for split in ("train", "val", "test"):
        assert np.array_equal(data["splits"][split], src[split])  # role.json lists tr backwards: sorted here
    assert data["sample_graph"] == "train" and data["name"] == "cora-saint"

    write_dataset(tmp_path / "ds", num_shards=2, **data)
    ds = open_dataset(tmp_path / "ds")
    assert ds.manifest.sample_graph == "train"
    stored = {name: np.load(tmp_path / "ds" / rel) for name, rel in TRAIN_GRAPH_FILES.items()}
    want_indptr, want_indices = induced(src["indptr"], src["indices"], src["train"])
    assert stored["nodes"].dtype == np.int64 and np.array_equal(stored["nodes"], src["train"])
    assert stored["indptr"].dtype == np.int64 and np.array_equal(stored["indptr"], want_indptr)
    assert stored["indices"].dtype == np.int32 and np.array_equal(stored["indices"], want_indices)
    assert want_indices.size > 0 and (np.diff(want_indptr) == 0).any()  # cora's train nodes: some isolated
    assert all(rel in ds.manifest.files for rel in TRAIN_GRAPH_FILES.values())
    assert verify_dataset(tmp_path / "ds").sample_graph == "train"


def test_multilabel_class_map(saint_dir, real_datasets):
    src = write_graphsaint(real_datasets / "cora.npz", saint_dir, multilabel=True)
    data = import_graphsaint(saint_dir)
    assert data["labels"].dtype == np.uint8 and np.array_equal(data["labels"], src["multilabel"])


def test_asymmetric_adjacency_is_refused_unless_symmetrize(saint_dir):
    import scipy.sparse as sp

    full = sp.load_npz(saint_dir / "adj_full.npz").tolil()
    full[5, 2000] = 1  # one direction only; 2000 is not a training node
    sp.save_npz(saint_dir / "adj_full.npz", full.tocsr())
    with pytest.raises(DatasetError) as err:
        import_graphsaint(saint_dir)
    assert str(err.value) == (f"{saint_dir / 'adj_full.npz'}[indices]: adjacency is not symmetric: edge (5, 2000) "
                              "has no reverse edge (2000, 5) (--symmetrize sorts and symmetrizes both adjacencies)")
    data = import_graphsaint(saint_dir, symmetrize=True)
    row = data["indices"][data["indptr"][2000]:data["indptr"][2001]]
    assert 5 in row and "symmetrized" in data["source"]


def _edit_json(path, change):
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


def _save_csr(path, matrix):
    import scipy.sparse as sp

    sp.save_npz(path, sp.csr_matrix(matrix))


def _adj_train_with_extra_edge(d, u, v):
    import scipy.sparse as sp

    train = sp.load_npz(d / "adj_train.npz").tolil()
    train[u, v] = train[v, u] = 1
    sp.save_npz(d / "adj_train.npz", train.tocsr())


def _adj_train_without_an_edge(d):
    import scipy.sparse as sp

    train = sp.load_npz(d / "adj_train.npz").tocoo()
    u, v = int(train.row[0]), int(train.col[0])
    keep = ~(((train.row == u) & (train.col == v)) | ((train.row == v) & (train.col == u)))
    sp.save_npz(d / "adj_train.npz", sp.csr_matrix((train.data[keep], (train.row[keep], train.col[keep])),
                                                   shape=train.shape))
    return u, v


BAD = {
    # name: (tamper(d) -> None, expected message fragment (after the directory))
    "missing file": (lambda d: (d / "role.json").unlink(), "not a complete GraphSAINT dataset: missing role.json"),
    "adj_full not an npz": (lambda d: (d / "adj_full.npz").write_text("hello"),
                            "adj_full.npz: not an .npz file (not a zip archive)"),
    "adj_full without shape": (lambda d: np.savez(d / "adj_full.npz", indptr=np.array([0, 0]), indices=np.array([0])[:0]),
                               "adj_full.npz: missing array 'shape'"),
    "coo format": (lambda d: np.savez(d / "adj_full.npz", indptr=np.array([0, 0]), indices=np.zeros(0, np.int32),
                                      shape=np.array([1, 1]), format=np.array(b"coo")),
                   "adj_full.npz[format]: sparse format 'coo' is not read"),
    "adj_train wrong shape": (lambda d: _save_csr(d / "adj_train.npz", np.zeros((5, 5))),
                              "adj_train.npz[shape]: (5, 5), but adj_full.npz has 2708 nodes"),
    "adj_train joins a test node": (lambda d: _adj_train_with_extra_edge(d, 0, 2000),
                                    "adj_train.npz: edge (2000, 0) touches node 2000, which is not a training node"),
    "adj_train edge not in adj_full": (lambda d: _adj_train_with_extra_edge(d, 0, 1),
                                       "adj_train.npz: edge (0, 1) is absent from adj_full.npz"),
    "feats rows": (lambda d: np.save(d / "feats.npy", np.zeros((2707, 3), np.float32)),
                   "feats.npy: shape (2707, 3), but adj_full.npz has 2708 nodes"),
    "class_map not json": (lambda d: (d / "class_map.json").write_text("{\"0\": 1,"),
                           "class_map.json: not valid JSON: Expecting property name enclosed in double quotes at line 1"),
    "class_map misses a node": (lambda d: _edit_json(d / "class_map.json", lambda m: m.pop("17")),
                                "class_map.json: node 17 has no class (2,707 of 2,708 nodes are listed"),
    "class_map id out of range": (lambda d: _edit_json(d / "class_map.json", lambda m: m.update({"2708": 1})),
                                  "class_map.json: node id 2708 is out of range: adj_full.npz has 2708 nodes"),
    "class_map key not an id": (lambda d: _edit_json(d / "class_map.json", lambda m: m.update({"x7": 1})),
                                "class_map.json: key 'x7' is not a node id (an integer)"),
    "class_map value not a class": (lambda d: _edit_json(d / "class_map.json", lambda m: m.update({"3": "cat"})),
                                    "class_map.json: class of node 3 is \"cat\", expected an integer class id"),
    "role.json missing va": (lambda d: _edit_json(d / "role.json", lambda r: r.pop("va")),
                             "role.json: missing key 'va' (expected tr, va, te: lists of node ids)"),
    "role.json id out of range": (lambda d: _edit_json(d / "role.json", lambda r: r["te"].append(9999)),
                                  "role.json['te']: node id 9999 is out of range [0, 2708)"),
    "role.json overlap": (lambda d: _edit_json(d / "role.json", lambda r: r["va"].append(r["tr"][0])),
                          "role.json['va']: node 139 is also in an earlier split"),
    "role.json not ids": (lambda d: _edit_json(d / "role.json", lambda r: r["tr"].append(1.5)),
                          "role.json['tr']: 1.5 is not a node id (an integer)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_graphsaint_files_name_file_and_field(saint_dir, case):
    tamper, message = BAD[case]
    tamper(saint_dir)
    with pytest.raises(DatasetError) as err:
        import_graphsaint(saint_dir)
    assert message in str(err.value)
    assert str(saint_dir) in str(err.value)


def test_adj_train_lacking_an_induced_edge_is_refused(saint_dir):
    u, v = _adj_train_without_an_edge(saint_dir)
    with pytest.raises(DatasetError, match=rf"adj_train.npz: lacks edge \({u}, {v}\) of adj_full.npz between "
                                           rf"training nodes {u} and {v}"):
        import_graphsaint(saint_dir)
