"""The oriented lists stored with the dataset (``services/dataset/oriented.py``).

Built once straight into files, then mapped by every later start; lists
built from other CSR files are built again; torn, edited or out-of-range
files are named and never reach the induction kernel; a read-only dataset
and an asymmetric graph fall back as before.
"""

from __future__ import annotations

import errno
import json
import logging

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import oriented as store
from saintpipe.services.dataset.sample_graph import open_sample_graph
from saintpipe.services.dataset.verify import verify_dataset
from saintpipe.services.sampler.kernels.oriented import orient_graph


def _assert_equal(got, want):
    for name, a, b in zip(got._fields, got, want):
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("kind", ["full", "train"])
def test_built_once_into_files_then_mapped(dataset, kind, caplog):
    caplog.set_level(logging.INFO)
    graph = open_sample_graph(dataset, kind)
    first, directory = store.open_or_build_orientation(dataset, graph)
    assert directory == dataset.path / "oriented" / kind and "stored in" in caplog.text
    _assert_equal(first, orient_graph(graph.indptr, graph.indices))
    caplog.clear()
    again, same = store.open_or_build_orientation(dataset, graph)
    assert same == directory and "oriented lists from" in caplog.text and "stored in" not in caplog.text
    assert all(isinstance(a, np.memmap) for a in again)
    _assert_equal(again, first)
    verify_dataset(dataset.path)


def test_lists_from_other_csr_files_are_built_again(dataset, caplog):
    graph = open_sample_graph(dataset, "full")
    _, directory = store.open_or_build_orientation(dataset, graph)
    meta_path = directory / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["sources"]["indices.npy"] = "0" * 64
    meta_path.write_text(json.dumps(meta))
    sources = store.graph_sources(dataset.path, dataset.manifest, "full")
    assert store.read_orientation(directory, graph.num_nodes, graph.num_edges, sources=sources) is None
    caplog.set_level(logging.INFO)
    rebuilt, _ = store.open_or_build_orientation(dataset, graph)
    assert "built from other CSR files" in caplog.text and "stored in" in caplog.text
    assert json.loads(meta_path.read_text())["sources"] == sources
    _assert_equal(rebuilt, orient_graph(graph.indptr, graph.indices))


def test_a_torn_file_is_named_and_built_again(dataset, caplog):
    graph = open_sample_graph(dataset, "full")
    _, directory = store.open_or_build_orientation(dataset, graph)
    target = directory / "forward.npy"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=r"oriented/full/forward.npy: checksum mismatch"):
        store.read_orientation(directory, graph.num_nodes, graph.num_edges)
    with pytest.raises(DatasetError, match=r"forward.npy: checksum mismatch"):
        verify_dataset(dataset.path)
    rebuilt, _ = store.open_or_build_orientation(dataset, graph)
    assert "unusable" in caplog.text and "building them again" in caplog.text
    _assert_equal(rebuilt, orient_graph(graph.indptr, graph.indices))


@pytest.mark.parametrize("field,value,what", [("columns", 10**6, "columns.npy: entry 0 is out of range"),
                                              ("reverse", -1, "reverse.npy: entry 0 is out of range"),
                                              ("indptr", 10**9, "indptr.npy: entry")])
def test_an_index_out_of_range_never_reaches_the_kernel(dataset, field, value, what):
    """A crafted file with a matching checksum in meta.json: the range check names it."""
    graph = open_sample_graph(dataset, "full")
    _, directory = store.open_or_build_orientation(dataset, graph)
    target = directory / f"{field}.npy"
    arr = np.load(target)
    arr[0 if field != "indptr" else 5] = value
    np.save(target, arr)
    meta_path = directory / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["files"][target.name] = store.sha256_file(target)
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=what):
        store.read_orientation(directory, graph.num_nodes, graph.num_edges)


@pytest.mark.parametrize("error,level", [(OSError(errno.EROFS, "Read-only file system"), logging.INFO),
                                         (PermissionError(errno.EACCES, "Permission denied"), logging.WARNING)])
def test_a_dataset_that_cannot_be_written_keeps_the_lists_in_memory(dataset, monkeypatch, caplog, error, level):
    def cannot_write(target):
        raise error

    monkeypatch.setattr(store, "replacing_dir", cannot_write)
    caplog.set_level(logging.INFO)
    graph = open_sample_graph(dataset, "full")
    lists, directory = store.open_or_build_orientation(dataset, graph)
    assert directory is None
    said = [r for r in caplog.records if "cannot store the oriented lists" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == level and error.strerror in said[0].getMessage()
    _assert_equal(lists, orient_graph(graph.indptr, graph.indices))
    assert not (dataset.path / "oriented").exists()


def test_an_asymmetric_graph_stores_nothing(dataset, monkeypatch):
    graph = open_sample_graph(dataset, "full")
    monkeypatch.setattr(store, "orient_graph", lambda *args, **kwargs: None)
    assert store.open_or_build_orientation(dataset, graph) == (None, None)
    assert not (dataset.path / "oriented" / "full").exists()
