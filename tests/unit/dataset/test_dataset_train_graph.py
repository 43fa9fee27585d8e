"""The training graph: built exactly, stored once with checksums, opened memory-mapped, verified."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import train_graph as tg
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.layout import TRAIN_GRAPH_FILES
from saintpipe.services.dataset.sample_graph import open_sample_graph, sampled_degrees
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.dataset.verify import verify_dataset

# 0-1, 0-2, 1-2, 2-3, 3-4, 4-5, 1-5, 6-3; training nodes 1, 2, 5, 6 (6 keeps no edge: its only neighbour is 3).
EDGES = np.array([[0, 1], [0, 2], [1, 2], [2, 3], [3, 4], [4, 5], [1, 5], [6, 3]])
TRAIN = np.array([6, 2, 1, 5])


def tiny():
    return edges_to_csr(EDGES[:, 0], EDGES[:, 1], 7)


def test_the_build_keeps_exactly_the_edges_among_training_nodes_and_every_training_node():
    indptr, indices = tiny()
    graph = tg.build_train_graph(indptr, indices, TRAIN)
    assert graph.nodes.tolist() == [1, 2, 5, 6]  # sorted global ids; local i <-> nodes[i]
    # local 0 = node 1: neighbours 2, 5; local 1 = node 2: neighbour 1; local 2 = node 5: neighbour 1; node 6: none
    assert graph.indptr.tolist() == [0, 2, 3, 4, 4]
    assert graph.indices.tolist() == [1, 2, 0, 0]
    assert (graph.indptr.dtype, graph.indices.dtype, graph.nodes.dtype) == (np.int64, np.int32, np.int64)
    assert graph.to_local(np.array([2, 6])).tolist() == [1, 3]
    assert graph.to_local(np.array([2, 3])) is None  # 3 is not a training node
    degrees = tg.induced_degrees(indptr, indices, TRAIN)
    assert degrees.tolist() == [0, 2, 1, 0, 0, 1, 0]


def test_an_empty_train_split_is_refused():
    indptr, indices = tiny()
    with pytest.raises(DatasetError, match="train split is empty"):
        tg.build_train_graph(indptr, indices, np.empty(0, dtype=np.int64))


def test_built_once_stored_with_checksums_then_opened_memory_mapped(dataset, caplog):
    caplog.set_level(logging.INFO)
    first = open_sample_graph(dataset, "train")
    assert first.stored and first.kind == "train"
    meta = json.loads((dataset.path / tg.META_NAME).read_text())
    assert sorted(meta["files"]) == sorted(TRAIN_GRAPH_FILES.values())
    assert "built the training graph" in caplog.text
    caplog.clear()
    again = open_sample_graph(dataset, "train")
    assert "built the training graph" not in caplog.text and "training graph from" in caplog.text  # reused
    assert isinstance(again.indices, np.memmap)
    want = tg.build_train_graph(dataset.indptr, dataset.indices, dataset.splits["train"])
    for name in ("indptr", "indices"):
        assert np.array_equal(getattr(again, name), getattr(want, name))
    assert np.array_equal(again.nodes, want.nodes)
    assert again.train_nodes is None  # every node of the training graph trains
    assert open_sample_graph(dataset, "auto").kind == "full"  # the manifest's default
    assert np.array_equal(sampled_degrees(dataset, "train"), tg.induced_degrees(dataset.indptr, dataset.indices,
                                                                                 dataset.splits["train"]))
    assert sampled_degrees(dataset, "auto") is None
    verify_dataset(dataset.path)  # a stored training graph is checked too


def test_a_torn_file_is_detected_and_a_built_graph_is_built_again(dataset, caplog):
    open_sample_graph(dataset, "train")
    target = dataset.path / TRAIN_GRAPH_FILES["indices"]
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=r"train_graph/indices.npy: checksum mismatch"):
        tg.load_train_graph(dataset.path)
    with pytest.raises(DatasetError, match=r"train_graph/indices.npy: checksum mismatch"):
        verify_dataset(dataset.path)
    graph = open_sample_graph(dataset, "train")
    assert "unusable" in caplog.text and "building it again" in caplog.text
    assert tg.load_train_graph(dataset.path) is not None
    assert graph.num_edges == tg.build_train_graph(dataset.indptr, dataset.indices,
                                                   dataset.splits["train"]).num_edges


def test_a_graph_from_other_dataset_files_is_stale(dataset):
    open_sample_graph(dataset, "train")
    meta_path = dataset.path / tg.META_NAME
    meta = json.loads(meta_path.read_text())
    meta["sources"]["split/train.npy"] = "0" * 64
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=r"meta.json: built from other dataset files .*split/train.npy"):
        tg.load_train_graph(dataset.path)


def test_verify_names_a_graph_that_is_not_the_induced_one(dataset):
    right = tg.build_train_graph(dataset.indptr, dataset.indices, dataset.splits["train"])
    indices = right.indices.copy()
    # One row's first neighbour u becomes u - 1 (still sorted, not a self loop): the checksums agree (it is
    # stored so), the edges do not.
    row = next(v for v in range(right.num_nodes) if right.indptr[v + 1] > right.indptr[v]
               and indices[right.indptr[v]] - 1 not in (v, -1))
    indices[right.indptr[row]] -= 1
    tg.store_train_graph(dataset.path, tg.TrainGraph(right.indptr, indices, right.nodes))
    with pytest.raises(DatasetError, match=r"train_graph/indices.npy: neighbours of training node \d+ differ"):
        verify_dataset(dataset.path)
    fewer = right.nodes[1:]
    tg.store_train_graph(dataset.path, tg.build_train_graph(dataset.indptr, dataset.indices, fewer))
    with pytest.raises(DatasetError, match=rf"train_graph/nodes.npy: .*training node {int(right.nodes[0])} is missing"):
        verify_dataset(dataset.path)


def test_a_read_only_dataset_keeps_the_graph_in_memory(dataset, monkeypatch, caplog):
    def read_only(target):  # what mkdir beside train_graph/ raises on a read-only mount
        raise PermissionError(30, "Read-only file system", str(target))

    monkeypatch.setattr(tg, "replacing_dir", read_only)
    graph = open_sample_graph(dataset, "train")
    assert not graph.stored and graph.num_nodes == dataset.splits["train"].size
    assert "cannot store it" in caplog.text and "Read-only file system" in caplog.text
    assert not (dataset.path / "train_graph").exists()
    counted = sampled_degrees(dataset, "train")  # nothing stored: counted from the full graph
    assert np.array_equal(counted[graph.nodes], np.diff(graph.indptr)) and counted.sum() == graph.num_edges


def test_a_shipped_training_graph_is_read_from_the_manifest_and_never_rebuilt(tmp_path):
    demo = generate_demo(num_nodes=600, feature_dim=4, seed=6)
    shipped = tg.build_train_graph(demo["indptr"], demo["indices"], demo["splits"]["train"])
    extra = {rel: getattr(shipped, name) for name, rel in TRAIN_GRAPH_FILES.items()}
    write_dataset(tmp_path / "gs", **demo, extra=extra, sample_graph="train")
    dataset = open_dataset(tmp_path / "gs")
    graph = open_sample_graph(dataset, "auto")  # the manifest says train
    assert graph.kind == "train" and graph.stored
    assert not (tmp_path / "gs" / tg.META_NAME).exists()
    verify_dataset(tmp_path / "gs")
    (tmp_path / "gs" / TRAIN_GRAPH_FILES["nodes"]).write_bytes(b"torn")
    with pytest.raises(DatasetError, match="train_graph/nodes.npy: checksum mismatch"):
        open_sample_graph(dataset, "train")
