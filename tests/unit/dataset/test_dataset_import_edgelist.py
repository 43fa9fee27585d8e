"""Importing edge lists with arbitrary node ids and keyed side files."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.edgelist import import_edgelist
from saintpipe.services.dataset.store import open_dataset, write_dataset


def _write(path, text):
    path.write_text(text)
    return path


def _edges(data):
    """The imported graph as a set of undirected edges between original ids."""
    ids, indptr, indices = data["extra"]["node_ids.npy"], data["indptr"], data["indices"]
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return {frozenset((ids[a].item(), ids[b].item())) for a, b in zip(rows, indices)}


def test_integer_ids_are_remapped_and_kept(tmp_path):
    edges = _write(tmp_path / "g.csv", "src,dst\n100,7\n7,5000\n5000,100\n100,7\n7,7\n42,100\n")
    data = import_edgelist(edges)
    assert data["extra"]["node_ids.npy"].tolist() == [7, 42, 100, 5000]
    assert _edges(data) == {frozenset(p) for p in [(100, 7), (7, 5000), (5000, 100), (42, 100)]}
    assert data["indices"].size == 8  # symmetrized, the duplicate and the self loop dropped
    assert data["features"].shape == (4, 2)  # default [1, log(1 + degree)]
    np.testing.assert_allclose(data["features"][:, 1], np.log1p([2, 1, 3, 2]), rtol=1e-6)


def test_string_ids_whitespace_with_comments_and_no_header(tmp_path):
    edges = _write(tmp_path / "g.txt", "# a SNAP-style file\nalice bob\n# more\nbob   carol\ncarol dave\n")
    data = import_edgelist(edges, string_ids=True)
    assert data["extra"]["node_ids.npy"].tolist() == ["alice", "bob", "carol", "dave"]
    assert _edges(data) == {frozenset(p) for p in [("alice", "bob"), ("bob", "carol"), ("carol", "dave")]}
    assert "(string ids)" in data["source"]


def test_non_integer_token_is_an_error_naming_file_and_line(tmp_path):
    # Before issue 22 this file was taken as string ids: "7" and "07" would have been two nodes.
    edges = _write(tmp_path / "g.csv", "src,dst\n# comment\n1,2\n\n2,07\n3,x4\n")
    with pytest.raises(DatasetError) as err:
        import_edgelist(edges)
    assert str(err.value) == (f"{edges}, line 6, column 2: node id 'x4' is not an integer "
                              "(ids are integers unless you give --string-ids)")
    _write(edges, "1,2\n2,3.5\n")
    with pytest.raises(DatasetError, match=r"g.csv, line 2, column 2: node id '3.5' is not an integer"):
        import_edgelist(edges)


def test_string_ids_keep_numeric_looking_tokens_apart(tmp_path):
    edges = _write(tmp_path / "g.csv", "7,07\n07,x\n")
    data = import_edgelist(edges, string_ids=True)
    assert data["extra"]["node_ids.npy"].tolist() == ["07", "7", "x"]
    assert _edges(data) == {frozenset(("7", "07")), frozenset(("07", "x"))}
    assert import_edgelist(_write(tmp_path / "n.csv", "7,07\n"))["extra"]["node_ids.npy"].tolist() == [7]


def test_tsv_with_keyed_side_tables_round_trip(tmp_path):
    edges = _write(tmp_path / "g.tsv", "u\tv\tweight\na\tb\t1\nb\tc\t1\nc\td\t1\nd\ta\t1\n")
    # Rows in any order; "e" only appears here, so it becomes an isolated node.
    feats = _write(tmp_path / "x.csv", "id,f0,f1\nd,4,40\nb,2,20\na,1,10\ne,5,50\nc,3,30\n")
    labels = _write(tmp_path / "y.csv", "id,label\na,cat\nb,dog\nc,cat\nd,dog\n")
    split = _write(tmp_path / "s.csv", "id,split\na,train\nb,train\nc,val\nd,test\ne,none\n")
    data = import_edgelist(edges, features=feats, labels=labels, split=split, string_ids=True)
    assert data["extra"]["node_ids.npy"].tolist() == ["a", "b", "c", "d", "e"]
    assert data["features"][:, 0].tolist() == [1, 2, 3, 4, 5]
    assert data["extra"]["label_names.npy"].tolist() == ["cat", "dog"]
    assert data["labels"].tolist() == [0, 1, 0, 1, -1]
    assert {k: v.tolist() for k, v in data["splits"].items()} == {"train": [0, 1], "val": [2], "test": [3]}
    write_dataset(tmp_path / "ds", num_shards=2, **data)
    ds = open_dataset(tmp_path / "ds", verify=True)
    assert np.array_equal(ds.features(), data["features"]) and ds.degrees()[4] == 0
    assert np.load(tmp_path / "ds" / "node_ids.npy").tolist() == ["a", "b", "c", "d", "e"]


def test_npy_side_files_indexed_by_integer_id(tmp_path):
    edges = _write(tmp_path / "g.csv", "0,1\n1,2\n2,3\n3,0\n")
    x = np.arange(10, dtype=np.float32).reshape(5, 2)  # node 4 exists only here
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.array([0, 1, 0, 1, 2]))
    np.save(tmp_path / "train.npy", np.array([0, 1]))
    mask = np.zeros(5, dtype=bool)
    mask[[2, 4]] = True
    np.save(tmp_path / "val.npy", mask)
    _write(tmp_path / "test.txt", "3\n")
    data = import_edgelist(edges, features=tmp_path / "x.npy", labels=tmp_path / "y.npy",
                           train=tmp_path / "train.npy", val=tmp_path / "val.npy", test=tmp_path / "test.txt")
    assert np.array_equal(data["features"], x) and data["labels"].tolist() == [0, 1, 0, 1, 2]
    assert {k: v.tolist() for k, v in data["splits"].items()} == {"train": [0, 1], "val": [2, 4], "test": [3]}


def test_random_split_covers_labelled_nodes_only(tmp_path):
    edges = _write(tmp_path / "g.csv", "".join(f"{i},{i + 1}\n" for i in range(99)))
    labels = _write(tmp_path / "y.csv", "".join(f"{i},{i % 3}\n" for i in range(0, 100, 2)))
    data = import_edgelist(edges, labels=labels, seed=4)
    chosen = np.concatenate(list(data["splits"].values()))
    assert chosen.size == 50 and (data["labels"][chosen] >= 0).all()
    assert data["splits"]["train"].size == 30


def test_multilabel_table(tmp_path):
    edges = _write(tmp_path / "g.csv", "1,2\n2,3\n")
    labels = _write(tmp_path / "y.csv", "id,l0,l1,l2\n1,1,0,1\n2,0,0,0\n3,0,1,0\n")
    data = import_edgelist(edges, labels=labels)
    assert data["labels"].dtype == np.uint8 and data["labels"].tolist() == [[1, 0, 1], [0, 0, 0], [0, 1, 0]]


BAD = {
    "missing edge file": (dict(), "edges.csv: file not found", "missing"),
    "one column": (dict(), "an edge list needs two columns", "1\n2\n"),
    "ragged row": (dict(), "edges.csv, line 3: 1 column(s), expected at least 2", "1,2\n2,3,4,5\n3\n"),
    "feature row missing": (dict(features="id,f\n1,0.5\n2,0.5\n"), "feats.csv: no feature row for node id 3", None),
    "feature not a number": (dict(features="id,f\n1,0.5\n2,abc\n3,1\n"),
                             "feats.csv, line 3, column 2: value 'abc' is not a number", None),
    "nan feature": (dict(features="id,f\n1,0.5\n2,nan\n3,1\n"), "feats.csv: feature of node 1, column 0 is nan", None),
    "duplicate feature id": (dict(features="id,f\n1,0.5\n1,0.5\n2,1\n3,1\n"), "feats.csv: node id 1 appears", None),
    "string id in side file": (dict(labels="id,label\n1,0\nbob,1\n"),
                               "labels.csv, line 3, column 1: node id 'bob' is not an integer", None),
    "split id unknown": (dict(train="1\n", val="2\n", test="99\n"), "test.csv: node id 99 does not occur", None),
    "bad split word": (dict(split="id,split\n1,train\n2,holdout\n"), "split.csv: split value 'holdout'", None),
    "split overlap": (dict(train="1\n2\n", val="2\n", test="3\n"), "val.csv: node 1 is also in an earlier split", None),
    "incomplete id lists": (dict(train="1\n"), "give all three of train, val and test", None),
    "unlabelled train node": (dict(labels="id,label\n1,0\n2,1\n", train="3\n", val="1\n", test="2\n"),
                              "train.csv: node 2 has no label", None),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_edge_list_inputs(tmp_path, case):
    side, message, edge_text = BAD[case]
    edges = tmp_path / "edges.csv"
    if edge_text != "missing":
        edges.write_text(edge_text or "1,2\n2,3\n")
    names = {"features": "feats.csv", "labels": "labels.csv", "split": "split.csv",
             "train": "train.csv", "val": "val.csv", "test": "test.csv"}
    kwargs = {k: _write(tmp_path / names[k], text) for k, text in side.items()}
    with pytest.raises(DatasetError) as err:
        import_edgelist(edges, **kwargs)
    assert message in str(err.value)


def test_npy_side_file_needs_integer_ids(tmp_path):
    edges = _write(tmp_path / "g.csv", "a,b\nb,c\n")
    np.save(tmp_path / "x.npy", np.ones((3, 2), dtype=np.float32))
    with pytest.raises(DatasetError, match="x.npy: a .npy side file is indexed by integer node id"):
        import_edgelist(edges, features=tmp_path / "x.npy", string_ids=True)


def test_the_dense_id_table_and_the_sorted_ids_agree_and_name_an_unknown_id():
    from saintpipe.services.dataset.importers.id_map import IdMap as _IdMap

    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 5000, 2000), rng.integers(0, 5000, 2000)  # gaps: ids that never occur
    dense = _IdMap.of([src, dst])
    assert dense.rank is not None  # small non-negative integers: one gather per lookup
    sparse = _IdMap.of([src * 10**12, dst * 10**12])  # ids far larger than their count: sorted and searched
    assert sparse.rank is None
    np.testing.assert_array_equal(dense.ids * 10**12, sparse.ids)
    np.testing.assert_array_equal(dense.lookup(src, "e"), sparse.lookup(src * 10**12, "e"))
    assert dense.lookup(src, "e").tolist() == np.searchsorted(np.unique(np.r_[src, dst]), src).tolist()
    absent = np.setdiff1d(np.arange(5000), dense.ids)[:1]
    assert absent.size == 1
    for ids, keys in ((dense, np.r_[src[:3], absent, 10**6, -4]), (sparse, np.r_[src[:3] * 10**12, 7])):
        with pytest.raises(DatasetError, match=r"^e: node id -?\d+ does not occur in the edge list"):
            ids.lookup(keys, "e")
    assert _IdMap.of([np.array([-3, 5]), np.array([2])]).rank is None  # negative ids: the sorted path
