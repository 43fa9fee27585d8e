"""A text edge list to a CSR in bounded memory: streamed in blocks, built on disk in row buckets.

Holding an edge list in memory costs several times the dataset it becomes
(int64 pairs, their dense remap, the symmetrized entries and the final rows:
a 1 GB list of 67 M edges peaked at 3.2 GB). Here no stage holds more than a
block of the text or a bucket of rows:

1. **read**: pyarrow's CSV reader parses the text in blocks (multi-threaded,
   the same reader a user would time alone); each block's two id columns
   are appended to two scratch files (int32 while the ids fit) and their ids collected
   (:class:`~saintpipe.services.dataset.importers.id_map.IdCollector`).
2. **map**: the scratch pairs are remapped to dense int32 ids in chunks,
   self loops dropped, and every entry's row counted in both directions
   (the graph is symmetrized); the dense pairs go to a second scratch file.
3. **fill**: the rows are cut into buckets of at most ``bucket_entries``
   raw entries; for each bucket one pass over the dense pairs scatters its
   rows' entries, which are then sorted and deduplicated in place
   (:func:`~saintpipe.services.dataset.csr.compact_rows`) and appended to
   the indices file.

Peak memory is one bucket plus O(N) row arrays and the id table, against
O(E) several times over in memory. The reader is strict: a file it cannot
parse as a plain delimited table (comments after the first data line, runs
of spaces, quoted fields, a row with a third column) raises
:class:`StreamUnsupported` unless :func:`~saintpipe.services.dataset.importers.tabular.locate`
finds a line that is wrong by the format's own rules, which is reported
with the file and line number; the caller then reads the file the
in-memory way.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from numba import njit

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers import tabular
from saintpipe.services.dataset.csr import compact_rows
from saintpipe.services.dataset.importers.id_map import IdCollector, IdMap

__all__ = ["EdgeStreamCSR", "StreamUnsupported", "scratch_beside", "stream_csr"]

log = logging.getLogger(__name__)

_BLOCK_BYTES = 1 << 22  # pyarrow block: 4 MB reads as fast as larger ones and holds less in flight
_CHUNK_PAIRS = 1 << 20  # rows per chunk when scanning the scratch files (16 MB of int64 ids per column)
_MIN_BUCKET = 1 << 22
_WRITES_IN_FLIGHT = 4  # blocks handed to the scratch writer and not yet written


class StreamUnsupported(Exception):
    """The file is valid but not plain enough for the streaming reader; read it in memory instead."""


@dataclass
class EdgeStreamCSR:
    """A streamed edge list's CSR: ``indices`` is a read-only memory map of a file in the scratch directory."""

    ids: IdMap
    indptr: np.ndarray
    indices: np.ndarray
    lines: int
    read_seconds: float
    build_seconds: float
    buckets: int


@contextlib.contextmanager
def scratch_beside(out: Path) -> Iterator[Path]:
    """A scratch directory on the file system ``out`` will be written to (the nearest existing parent),
    removed afterwards: the build's files are the size of the edge list, too large for a RAM-backed /tmp."""
    parent = Path(out).absolute().parent
    while not parent.is_dir():
        parent = parent.parent
    try:
        scratch = tempfile.TemporaryDirectory(prefix=".saintpipe-import-", dir=parent)
    except OSError as exc:
        raise DatasetError(f"{parent}: cannot make the import's scratch directory there: {exc.strerror or exc}") from None
    with scratch as tmp:
        yield Path(tmp)


def _blocks(path: Path, fmt: tabular.TableFormat) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(sources, targets) int64 of each block of the table's first two columns, by pyarrow's CSV reader."""
    names = [f"c{i}" for i in range(fmt.num_columns)]
    reader = pacsv.open_csv(
        path,
        read_options=pacsv.ReadOptions(skip_rows=fmt.skiprows, column_names=names, block_size=_BLOCK_BYTES),
        parse_options=pacsv.ParseOptions(delimiter=fmt.delimiter or " ", quote_char=False, ignore_empty_lines=True),
        convert_options=pacsv.ConvertOptions(include_columns=names[:2], column_types={n: pa.int64() for n in names[:2]},
                                             quoted_strings_can_be_null=False),
    )
    for batch in reader:
        src, dst = batch.column(0), batch.column(1)
        if src.null_count or dst.null_count:
            raise ValueError("an empty id field")
        yield src.to_numpy(), dst.to_numpy()


def _read(path: Path, fmt: tabular.TableFormat, scratch: Path, collector: IdCollector) -> tuple[int, type]:
    """Stage 1: the table's two id columns appended to ``src.ids`` and ``dst.ids``, as int32 while every id
    fits (half the bytes to write and read back), else int64; returns the lines read and that dtype.

    A writer thread appends the blocks while the reader parses the next ones: writing gigabytes waits on
    the page cache's write-back, which would otherwise stall parsing.
    """
    lines = 0
    dtype: type[np.signedinteger[Any]] = np.int32
    pending: collections.deque = collections.deque()
    try:
        with (scratch / "src.ids").open("wb") as src_out, (scratch / "dst.ids").open("wb") as dst_out, \
                ThreadPoolExecutor(1, thread_name_prefix="edge-scratch") as writer:
            for src, dst in _blocks(path, fmt):
                if not lines:  # the first block, about _BLOCK_BYTES of text, tells the lines to expect
                    collector.expected = 2 * src.size * (path.stat().st_size // _BLOCK_BYTES + 1)
                collector.add(src)
                collector.add(dst)
                if dtype == np.int32 and not (collector.lo >= 0 and collector.hi < 2**31):
                    dtype = np.int64
                    _drain(pending)
                    _widen(scratch / "src.ids", src_out)
                    _widen(scratch / "dst.ids", dst_out)
                pending.append(writer.submit(_append, src.astype(dtype, copy=False), src_out,
                                             dst.astype(dtype, copy=False), dst_out))
                if len(pending) > _WRITES_IN_FLIGHT:
                    pending.popleft().result()
                lines += src.size
            _drain(pending)
        # The reader's pool keeps its blocks for reuse; the later stages need the memory instead.
        pa.default_memory_pool().release_unused()
    except (pa.ArrowInvalid, ValueError) as exc:
        error = tabular.parse_error(path, fmt, (0, 1), "integer", "node id",
                                    hint=" (ids are integers unless you give --string-ids)")
        if error is None:
            raise StreamUnsupported(f"{path}: {exc}") from None
        raise error from None
    return lines, dtype


def _append(src: np.ndarray, src_out, dst: np.ndarray, dst_out) -> None:
    src.tofile(src_out)
    dst.tofile(dst_out)


def _drain(pending: collections.deque) -> None:
    while pending:
        pending.popleft().result()


def _widen(path: Path, out) -> None:
    """Rewrite the int32 ids written so far to ``path`` (open as ``out``) as int64, in place."""
    out.flush()
    narrow = np.fromfile(path, dtype=np.int32)
    out.seek(0)
    narrow.astype(np.int64).tofile(out)


def _column_chunks(scratch: Path, names: tuple[str, str], dtype: type) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The two column files ``names`` in lockstep, ``_CHUNK_PAIRS`` rows at a time."""
    with (scratch / names[0]).open("rb") as a, (scratch / names[1]).open("rb") as b:
        while True:
            src: np.ndarray = np.fromfile(a, dtype=dtype, count=_CHUNK_PAIRS)
            if src.size == 0:
                return
            yield src, np.fromfile(b, dtype=dtype, count=src.size)


def _map(scratch: Path, ids: IdMap, id_dtype: type, where: str) -> np.ndarray:
    """Stage 2: dense int32 ids without self loops to ``src.i32`` and ``dst.i32``; returns the raw row sizes
    (int64 [N], both directions counted)."""
    counts = np.zeros(ids.ids.size, dtype=np.int64)
    with (scratch / "src.i32").open("wb") as src_out, (scratch / "dst.i32").open("wb") as dst_out:
        for src, dst in _column_chunks(scratch, ("src.ids", "dst.ids"), id_dtype):
            if ids.rank is None:
                src, dst = ids.lookup(src, where), ids.lookup(dst, where)
            src32, dst32 = np.empty(src.size, dtype=np.int32), np.empty(src.size, dtype=np.int32)
            kept = _pack_count(src, dst, ids.rank, src32, dst32, counts)
            src32[:kept].tofile(src_out)
            dst32[:kept].tofile(dst_out)
    for name in ("src.ids", "dst.ids"):
        (scratch / name).unlink()
    return counts


def bucket_bounds(raw_indptr: np.ndarray, bucket_entries: int) -> list[tuple[int, int]]:
    """Contiguous row ranges holding at most ``bucket_entries`` raw entries each (a row larger than that
    is a bucket of its own)."""
    n = raw_indptr.size - 1
    bounds, start = [], 0
    while start < n:
        stop = int(np.searchsorted(raw_indptr, raw_indptr[start] + bucket_entries, side="right")) - 1
        stop = min(max(stop, start + 1), n)
        bounds.append((start, stop))
        start = stop
    return bounds


def _fill(scratch: Path, raw_indptr: np.ndarray, bounds: list[tuple[int, int]]) -> np.ndarray:
    """Stage 3: each bucket's rows scattered, sorted, deduplicated and appended to ``indices.i32``;
    returns the final indptr."""
    n = raw_indptr.size - 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    with (scratch / "indices.i32").open("wb") as out:
        for lo, hi in bounds:
            local = raw_indptr[lo:hi + 1] - raw_indptr[lo]
            slots = np.empty(int(local[-1]), dtype=np.int32)
            cursor = local[:-1].copy()
            for src, dst in _column_chunks(scratch, ("src.i32", "dst.i32"), np.int32):
                _scatter_bucket(src, dst, lo, hi, cursor, slots)
            kept = compact_rows(local, slots)
            slots[:kept].tofile(out)
            indptr[lo + 1:hi + 1] = np.diff(local)
            del slots
    for name in ("src.i32", "dst.i32"):
        (scratch / name).unlink()
    np.cumsum(indptr, out=indptr)
    return indptr


def stream_csr(path: Path, fmt: tabular.TableFormat, scratch: Path, extra_keys: Sequence[np.ndarray] = (),
               bucket_entries: int | None = None) -> EdgeStreamCSR:
    """The symmetrized, deduplicated CSR (self loops dropped) of an integer-id edge list, built in ``scratch``.

    Args:
        path, fmt: the edge table and its sniffed format; ids are the first two columns.
        scratch: an existing directory for the scratch files and the indices file (about 24 bytes per
            line of the table, on disk).
        extra_keys: more integer ids that are nodes (ids of the side files).
        bucket_entries: the most raw entries a bucket of rows holds in memory (int32 each); default a
            quarter of the raw entries, at least 4 M.

    Raises:
        DatasetError: a line the format's rules refuse (file, line, column), an empty table, or more
            nodes than int32 ids hold.
        StreamUnsupported: a valid table the streaming reader cannot parse.
    """
    try:
        return _stream_csr(path, fmt, scratch, extra_keys, bucket_entries)
    except OSError as exc:  # disk full, the scratch directory removed under us, ...
        raise DatasetError(f"{path}: import failed writing or reading its scratch files in {scratch}: "
                           f"{exc.strerror or exc}") from None


def _stream_csr(path: Path, fmt: tabular.TableFormat, scratch: Path, extra_keys: Sequence[np.ndarray],
                bucket_entries: int | None) -> EdgeStreamCSR:
    t0 = time.monotonic()
    collector = IdCollector()
    lines, id_dtype = _read(path, fmt, scratch, collector)
    if lines == 0:
        raise DatasetError(f"{path}: holds no edges")
    read_seconds = time.monotonic() - t0
    for keys in extra_keys:
        collector.add(keys)
    ids = collector.id_map()
    if ids.ids.size >= 2**31:
        raise DatasetError(f"{path}: {ids.ids.size} nodes do not fit int32 indices")
    counts = _map(scratch, ids, id_dtype, str(path))
    raw_indptr = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=raw_indptr[1:])
    del counts
    bounds = bucket_bounds(raw_indptr, bucket_entries or max(_MIN_BUCKET, -(-int(raw_indptr[-1]) // 4)))
    indptr = _fill(scratch, raw_indptr, bounds)
    entries = int(indptr[-1])
    indices = (np.memmap(scratch / "indices.i32", dtype=np.int32, mode="r", shape=(entries,)) if entries
               else np.empty(0, dtype=np.int32))
    built = EdgeStreamCSR(ids=ids, indptr=indptr, indices=indices, lines=lines, read_seconds=read_seconds,
                          build_seconds=time.monotonic() - t0 - read_seconds, buckets=len(bounds))
    log.info("edge list %s: %d lines read in %.1f s (%.0f lines/s), CSR of %d entries built in %.1f s, %d bucket(s)",
             path, lines, read_seconds, lines / max(read_seconds, 1e-9), entries, built.build_seconds, len(bounds),
             extra={"edge_stream": built})
    return built


@njit(cache=True, nogil=True)
def _pack_count(src, dst, rank, src_out, dst_out, counts):  # pragma: no cover - compiled
    """Pairs without self loops into the int32 outputs, each counted in both endpoints' rows; returns how many.
    ``rank`` (not None): the dense table the ids go through first (every id is in it, the stream collected them)."""
    k = 0
    for i in range(src.size):
        u, v = src[i], dst[i]
        if rank is not None:
            u, v = rank[u], rank[v]
        if u == v:
            continue
        src_out[k] = u
        dst_out[k] = v
        counts[u] += 1
        counts[v] += 1
        k += 1
    return k


@njit(cache=True, nogil=True)
def _scatter_bucket(src, dst, lo, hi, cursor, slots):  # pragma: no cover - compiled
    """Both directions of every pair whose row lies in ``[lo, hi)`` into that row's next slot."""
    for i in range(src.size):
        u, v = src[i], dst[i]
        if lo <= u < hi:
            slots[cursor[u - lo]] = v
            cursor[u - lo] += 1
        if lo <= v < hi:
            slots[cursor[v - lo]] = u
            cursor[v - lo] += 1
