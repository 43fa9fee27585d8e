"""The streamed edge-list build: the same graph as the in-memory one, in buckets, from pyarrow's reader."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers import tabular
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.dataset.importers.edge_stream import StreamUnsupported, bucket_bounds, scratch_beside, stream_csr
from saintpipe.services.dataset.importers.id_map import IdCollector, IdMap
from saintpipe.services.dataset.importers.edgelist import import_edgelist


def _stream(path, scratch, **kw):
    built = stream_csr(path, tabular.sniff(path), scratch, **kw)
    return built.ids.ids, built.indptr, np.array(built.indices), built


def _reference(src, dst):
    ids = np.unique(np.r_[src, dst])
    indptr, indices = edges_to_csr(np.searchsorted(ids, src), np.searchsorted(ids, dst), ids.size)
    return ids, indptr, indices


@pytest.mark.parametrize("bucket_entries", [1, 37, None])
def test_buckets_build_the_same_csr_as_the_whole_graph_at_once(tmp_path, bucket_entries):
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 3000, 4000), rng.integers(0, 3000, 4000)
    src[:50] = dst[:50]  # self loops
    src, dst = np.r_[src, dst[:300]], np.r_[dst, src[:300]]  # reverse duplicates
    path = tmp_path / "g.txt"
    np.savetxt(path, np.column_stack([src, dst]), fmt="%d")
    ids, indptr, indices, built = _stream(path, tmp_path, bucket_entries=bucket_entries)
    ref_ids, ref_indptr, ref_indices = _reference(src, dst)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(indptr, ref_indptr)
    np.testing.assert_array_equal(indices, ref_indices)
    assert built.lines == src.size
    assert (built.buckets > 1) == (bucket_entries is not None)  # the default bucket holds this small graph
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.txt", "indices.i32"]  # scratch files removed


def test_bucket_bounds_cover_the_rows_within_the_budget():
    sizes = np.array([3, 0, 5, 12, 1, 1, 0, 4, 9])
    raw = np.r_[0, np.cumsum(sizes)]
    for budget in (1, 5, 8, 13, 100):
        bounds = bucket_bounds(raw, budget)
        assert bounds[0][0] == 0 and bounds[-1][1] == sizes.size
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        for lo, hi in bounds:
            assert hi > lo
            assert sizes[lo:hi].sum() <= budget or hi - lo == 1  # a larger row is a bucket of its own
    assert bucket_bounds(raw, 100) == [(0, sizes.size)]


def test_sparse_and_negative_ids_go_through_the_sorted_map(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("src,dst\n-5,10000000000000\n10000000000000,7\n7,-5\n7,7\n")
    ids, indptr, indices, _ = _stream(path, tmp_path)
    assert ids.tolist() == [-5, 7, 10**13]
    assert indptr.tolist() == [0, 2, 4, 6]
    assert indices.tolist() == [1, 2, 0, 2, 0, 1]


def test_id_collector_agrees_with_one_sort_whatever_the_order_of_blocks():
    rng = np.random.default_rng(1)
    blocks = [rng.integers(0, 500, 300), rng.integers(0, 5000, 200), np.array([3, 3]), rng.integers(0, 50, 10)]
    for order in (blocks, blocks[::-1], blocks + [np.array([-1, 10**15])]):
        collector = IdCollector()
        for b in order:
            collector.add(b)
        got = collector.id_map()
        want = np.unique(np.concatenate(order))
        np.testing.assert_array_equal(got.ids, want)
        np.testing.assert_array_equal(got.lookup(want[::-1], "w"), np.arange(want.size)[::-1])
    assert IdMap.of([np.array([1, 2])]).rank is not None


@pytest.mark.parametrize("text", [
    "# header comment\n\n# another\n1 2\n2 3\n",  # leading comments and a blank line
    "src,dst\r\n1,2\r\n2,3\r\n",  # a header row and CRLF line ends
    "1\t2\n\n2\t3\n\n",  # tabs, blank lines between rows
    "1,2,0.5\n2,3,0.25\n",  # a weight column, ignored
])
def test_plain_tables_stream(tmp_path, text):
    path = tmp_path / ("g.csv" if "," in text else "g.txt")
    path.write_text(text)
    ids, indptr, indices, _ = _stream(path, tmp_path)
    assert ids.tolist() == [1, 2, 3]
    assert indptr.tolist() == [0, 1, 3, 4]
    assert indices.tolist() == [1, 0, 2, 1]


@pytest.mark.parametrize("text", [
    "1 2\n# a comment between rows\n2 3\n",
    "1 2 # a trailing comment\n2 3\n",
    "1  2\n2 3\n",  # a run of spaces
    '"1",2\n2,3\n',  # a quoted id
    "+1 2\n2 3\n",
])
def test_valid_tables_the_stream_refuses_are_read_in_memory(tmp_path, text):
    path = tmp_path / ("g.csv" if "," in text else "g.txt")
    path.write_text(text)
    with pytest.raises(StreamUnsupported, match="g"):
        _stream(path, tmp_path)
    data = import_edgelist(path)  # the in-memory reader takes them
    assert data["extra"]["node_ids.npy"].tolist() == [1, 2, 3]
    assert data["indices"].tolist() == [1, 0, 2, 1]


def test_bad_lines_name_the_file_and_line(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("1,2\n2,3\n3,\n")
    with pytest.raises(DatasetError, match=r"g.csv, line 3, column 2: node id '' is not an integer"):
        _stream(path, tmp_path)
    path.write_text("1,2\n" * 5 + "2,x\n")
    with pytest.raises(DatasetError, match=r"g.csv, line 6, column 2: node id 'x' is not an integer"):
        _stream(path, tmp_path)
    path.write_text("1,2\n4\n")
    with pytest.raises(DatasetError, match=r"g.csv, line 2: 1 column\(s\), expected at least 2"):
        _stream(path, tmp_path)


def test_scratch_beside_is_on_the_output_side_and_removed(tmp_path):
    with scratch_beside(tmp_path / "missing" / "deeper" / "out") as scratch:
        assert scratch.parent == tmp_path and scratch.is_dir()
        (scratch / "f").write_bytes(b"x")
    assert not scratch.exists()


def test_many_blocks_and_ids_past_int32_midway_widen_the_scratch(tmp_path, monkeypatch):
    from saintpipe.services.dataset.importers import edge_stream

    monkeypatch.setattr(edge_stream, "_BLOCK_BYTES", 256)  # dozens of blocks of a few lines
    rng = np.random.default_rng(8)
    src, dst = rng.integers(0, 300, 600), rng.integers(0, 300, 600)
    src[450], dst[451] = 2**40, -7  # past int32 only after hundreds of lines were written as int32
    path = tmp_path / "g.txt"
    np.savetxt(path, np.column_stack([src, dst]), fmt="%d")
    ids, indptr, indices, built = _stream(path, tmp_path, bucket_entries=100)
    ref_ids, ref_indptr, ref_indices = _reference(src, dst)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(indptr, ref_indptr)
    np.testing.assert_array_equal(indices, ref_indices)
    assert built.lines == 600 and built.buckets > 1


def test_a_scratch_write_failure_is_one_error_naming_the_file(tmp_path, monkeypatch):
    from saintpipe.services.dataset.importers import edge_stream

    path = tmp_path / "g.txt"
    path.write_text("1 2\n2 3\n")

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(edge_stream, "_append", full)
    with pytest.raises(DatasetError, match=r"g.txt: import failed writing or reading its scratch files in .*: "
                                           r"No space left on device"):
        _stream(path, tmp_path)
