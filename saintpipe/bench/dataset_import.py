"""``saintpipe bench import``: text edge-list import against pyarrow's CSV reader alone, with its peak memory.

The edge list is a Kronecker graph written as text once (``source target`` per line, every directed entry) or
a file you give. In the same run: pyarrow's ``read_csv`` reads its two columns alone (all threads), then
``data import edgelist`` imports it in a fresh process, whose maximum resident set size is its peak. Reported:
the import's read stage and the whole import as ratios to the reader alone (the reader's seconds over theirs:
1.0 is as fast as the reader), and the peak over the bytes of the dataset written (its fixed interpreter
footprint shown apart).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

GB = 1e9


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser("import", help="time a text edge-list import against pyarrow's reader alone",
                            description="Import a text edge list (a Kronecker graph written as text, or --edges) "
                            "and report its read rate and whole time as ratios to pyarrow.csv reading the same "
                            "file in the same run, and its peak memory over the bytes it writes.")
    parser.add_argument("--scale", type=integer(1, 30), default=20,
                        help="Kronecker scale of the generated edge list, mean degree 16 (default 20)")
    parser.add_argument("--edges", type=Path, help="an existing edge list (two integer id columns) instead")
    parser.add_argument("--workdir", type=Path, help="where the edge list and the dataset go (default: a "
                        "temporary directory under the current one, removed afterwards)")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def write_edge_list(indptr, indices, out: Path) -> None:
    """Every directed entry of a CSR as a ``source target`` line, by pyarrow's CSV writer, 16 M rows at a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    options = pacsv.WriteOptions(include_header=False, delimiter=" ")
    step = 1 << 24
    with pacsv.CSVWriter(str(out), pa.schema([("src", pa.int64()), ("dst", pa.int64())]), write_options=options) as w:
        start = 0
        while start < indptr.size - 1:
            stop = int(np.searchsorted(indptr, indptr[start] + step, side="right")) - 1
            stop = min(max(stop, start + 1), indptr.size - 1)
            src = np.repeat(np.arange(start, stop, dtype=np.int64), np.diff(indptr[start:stop + 1]))
            dst = np.asarray(indices[indptr[start]:indptr[stop]], dtype=np.int64)
            w.write_table(pa.table({"src": src, "dst": dst}))
            start = stop


def reader_seconds(path: Path) -> float:
    """pyarrow's CSV reader alone: the file's two id columns as int64 (the sniffed delimiter and header)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from saintpipe.services.dataset.importers.tabular import sniff

    fmt = sniff(path)
    names = [f"c{i}" for i in range(fmt.num_columns)]
    t0 = time.perf_counter()
    pacsv.read_csv(path, read_options=pacsv.ReadOptions(skip_rows=fmt.skiprows, column_names=names),
                   parse_options=pacsv.ParseOptions(delimiter=fmt.delimiter or " "),
                   convert_options=pacsv.ConvertOptions(include_columns=names[:2],
                                                        column_types={n: pa.int64() for n in names[:2]}))
    return time.perf_counter() - t0


def measure(edges: Path, out: Path) -> dict[str, float | int]:
    """Import ``edges`` to ``out`` in a child process; its figures and pyarrow's time on the same file."""
    from saintpipe.bench.generate import child_figures

    reader = reader_seconds(edges)
    figures = child_figures(__name__, [str(edges), str(out)], "the import process", stderr_tail=800)
    dataset = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    figures.update({
        "text_gb": edges.stat().st_size / GB,
        "reader_s": reader,
        "read_ratio": reader / figures["read_s"],
        "import_ratio": reader / figures["import_s"],
        "dataset_gb": dataset / GB,
        "peak_over_dataset": figures["peak_rss_gb"] / (dataset / GB),
    })
    return figures


class _BuildFigures(logging.Handler):
    """Keeps the streamed build's figures, which ``stream_csr`` logs as the record's ``edge_stream``."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.built = None

    def emit(self, record: logging.LogRecord) -> None:
        self.built = getattr(record, "edge_stream", self.built)


def _status_bytes(field: str) -> int:
    """A size from /proc/self/status. VmHWM, not ru_maxrss: ru_maxrss keeps the parent's peak across fork
    and exec, so a child started by a large parent would report the parent's."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"/proc/self/status has no {field}")


def _child(edges: Path, out: Path) -> dict[str, float | int]:
    """In the child: the import as ``data import edgelist`` does it, timed, and this process's peak."""
    from saintpipe.services.dataset.importers.edge_stream import scratch_beside
    from saintpipe.services.dataset.importers.edgelist import import_edgelist
    from saintpipe.services.dataset.store import write_dataset

    handler = _BuildFigures()
    stream_log = logging.getLogger("saintpipe.services.dataset.importers.edge_stream")
    stream_log.addHandler(handler)
    logging.getLogger("saintpipe").setLevel(logging.ERROR)  # no "no labels given" notice in the output
    stream_log.setLevel(logging.INFO)
    base = _status_bytes("VmRSS")
    t0 = time.perf_counter()
    with scratch_beside(out) as scratch:
        write_dataset(out, **import_edgelist(edges, header=False, scratch=scratch))
    seconds = time.perf_counter() - t0
    built = handler.built
    if built is None:
        raise SystemExit(f"{edges}: the import did not stream (the table was read in memory)")
    return {
        "lines": built.lines,
        "nodes": int(built.indptr.size - 1),
        "edges_directed": int(built.indptr[-1]),
        "buckets": built.buckets,
        "read_s": built.read_seconds,
        "build_s": built.build_seconds,
        "import_s": seconds,
        "peak_rss_gb": _status_bytes("VmHWM") / GB,
        "base_rss_gb": base / GB,
    }


def _bench(args: argparse.Namespace) -> int:
    import shutil

    from saintpipe.core.report import emit_report

    work = args.workdir or Path(tempfile.mkdtemp(prefix="saintpipe-bench-import-", dir="."))
    work.mkdir(parents=True, exist_ok=True)
    try:
        edges = args.edges
        if edges is None:
            from saintpipe.services.dataset.kronecker import generate_kronecker

            data = generate_kronecker(args.scale, 16, seed=0, feature_dim=1)
            edges = work / f"kron{args.scale}.txt"
            write_edge_list(data["indptr"], data["indices"], edges)
            del data
        out = work / "imported"
        shutil.rmtree(out, ignore_errors=True)
        figures = measure(edges, out)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    emit_report(
        "import",
        [figures],
        params={"edges": str(args.edges) if args.edges else f"kronecker scale {args.scale}, degree 16"},
        summary={"read rate / pyarrow.csv alone": figures["read_ratio"],
                 "whole import rate / pyarrow.csv alone": figures["import_ratio"],
                 "peak / dataset bytes": figures["peak_over_dataset"]},
        as_json=args.json,
        columns=["lines", "text_gb", "reader_s", "read_s", "build_s", "import_s", "read_ratio", "import_ratio",
                 "peak_rss_gb", "base_rss_gb", "dataset_gb", "peak_over_dataset", "buckets"],
    )
    return 0


if __name__ == "__main__":
    print(json.dumps(_child(Path(sys.argv[1]), Path(sys.argv[2]))))
