"""``saintpipe predict`` and ``saintpipe embed``: use the model a run kept in its run directory.

Both run layer-wise full-graph inference in bounded memory (:mod:`saintpipe.trainer.inference`): one layer at
a time over all nodes in row blocks, layer outputs too large for memory in temporary memory-mapped files.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from saintpipe.core.argtypes import integer

MEMORY_HELP = ("about the most memory inference uses, in MiB (default 2048): two layer outputs, each in memory up "
               "to 3/8 of it (larger ones in temporary files under --tmpdir), and one block of rows")


def register(groups: argparse._SubParsersAction) -> None:
    predict = groups.add_parser(
        "predict",
        help="predict labels with the model of a run directory",
        description="Predict the labels of the given nodes (default: all) with the model a run kept: class ids "
        "(multi-label data: one 0/1 row per node), in the order the nodes were given. Written as .npy, or as "
        "CSV (node,label; multi-label: node,label_0,...) when --out ends in .csv or is - (stdout). Layer-wise "
        "full-graph inference in bounded memory (docs/explanation/local-run.md).",
    )
    predict.add_argument("--nodes", metavar="IDS|FILE|SPLIT",
                         help="node ids: comma-separated (3,17,42), a file (.npy of integers, or text with one "
                              "or more ids per line), or a split name (train, val, test); default: every node")
    predict.add_argument("--original-ids", action="store_true",
                         help="--nodes are the ids of the imported edge list (strings with --string-ids), and the "
                              "CSV names nodes by them (the dataset's node_ids.npy)")
    _common(predict, "predictions.npy", _predict)

    embed = groups.add_parser(
        "embed",
        help="write node embeddings with the model of a run directory",
        description="Write every node's embedding (float32 [N, width] .npy, row i = node i): the output of a "
        "graph layer of the model a run kept, after its activation (default: the last one, what the classifier "
        "reads). Layer-wise full-graph inference in bounded memory (docs/explanation/local-run.md).",
    )
    embed.add_argument("--layer", type=integer(1, 64), metavar="K",
                       help="graph layer K (1 = the first); default: the last")
    _common(embed, "embeddings.npy", _embed)


def _common(parser: argparse.ArgumentParser, default_out: str, func) -> None:
    """RUN_DIR and the flags both commands take; ``func`` handles the command."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                        help="the run directory (the last line of `saintpipe run`'s summary), or a model file")
    parser.add_argument("--checkpoint", choices=("best", "final"), default="best",
                        help="the model at the best validation score (default) or at the end of training")
    parser.add_argument("--data", type=Path, metavar="DATASET",
                        help="dataset directory (default: the one the model was trained on)")
    parser.add_argument("--out", metavar="FILE", help=f"output file (default: RUN_DIR/{default_out})")
    parser.add_argument("--device", default="cpu", help="torch device: cpu (default), cuda, cuda:1, auto")
    parser.add_argument("--memory-mb", type=integer(16, 2**24), default=2048, metavar="MB", help=MEMORY_HELP)
    parser.add_argument("--block-rows", type=integer(1, 2**31 - 1), default=65_536, metavar="N",
                        help="output rows per block at most (default 65536)")
    parser.add_argument("--tmpdir", type=Path, help="where layer outputs too large for memory go (default: $TMPDIR)")
    parser.set_defaults(func=func)


# --- the commands -----------------------------------------------------------------------------------------
def _predict(args: argparse.Namespace) -> int:
    import numpy as np

    from saintpipe.core.files import write_atomic
    from saintpipe.pipeline.predict import original_ids, predict_labels, read_nodes, read_original_nodes

    session = _open(args)
    if args.original_ids:
        names = original_ids(session.dataset)  # checked before the inference, which takes a while
        nodes = read_original_nodes(args.nodes, names) if args.nodes else None
    else:
        nodes = read_nodes(args.nodes, session.dataset) if args.nodes else None
    labels = predict_labels(session.inference(), session.saved.model.multilabel, nodes)
    ids = nodes if nodes is not None else np.arange(session.dataset.num_nodes, dtype=np.int64)
    if args.original_ids:
        ids = names[ids]
    out = args.out or str(_beside(args.run_dir) / "predictions.npy")
    if out != "-":
        _check_out(Path(out))
    if out == "-" or out.lower().endswith(".csv"):
        _write_csv(out, ids, labels)
    else:
        write_atomic(out, lambda fh: np.save(fh, labels))
    if out != "-":
        kind = "0/1 label rows" if labels.ndim == 2 else "class ids"
        print(f"wrote {labels.shape[0]:,} predictions ({kind}, {session.which} model) to {out} "
              f"{session.timings()}", file=sys.stderr)
    return 0


def _embed(args: argparse.Namespace) -> int:
    import numpy as np

    session = _open(args)
    model = session.saved.model
    depth = len(model.layers)
    if args.layer is not None and args.layer > depth:
        from saintpipe.core.errors import InvalidArgument

        raise InvalidArgument(f"--layer {args.layer}: the model has graph layers 1 to {depth}")
    layer = args.layer or depth
    width = model.layers[layer - 1].f_out
    out = Path(args.out) if args.out else _beside(args.run_dir) / "embeddings.npy"
    _check_out(out)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        # Written in place through a memory map: the embeddings never sit in memory whole.
        array = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(session.dataset.num_nodes, width))
        session.inference().embeddings(layer, out=array)
        array.flush()
        del array
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    print(f"wrote embeddings [{session.dataset.num_nodes:,} x {width}] (layer {layer} of {depth}, {session.which} "
          f"model) to {out} {session.timings()}", file=sys.stderr)
    return 0


# --- pieces -----------------------------------------------------------------------------------------------
def _open(args: argparse.Namespace):
    from saintpipe.pipeline.predict import open_session
    from saintpipe.trainer.inference import InferenceLimits

    memory = args.memory_mb << 20
    limits = InferenceLimits(block_rows=args.block_rows, block_bytes=memory // 4, spill_bytes=memory * 3 // 8,
                             tmpdir=args.tmpdir)
    return open_session(args.run_dir, args.checkpoint, args.data, limits, args.device)


def _check_out(out: Path) -> None:
    """Refuse an output path that cannot be written before the (long) inference runs, in one line."""
    from saintpipe.core.errors import InvalidArgument

    if out.is_dir():
        raise InvalidArgument(f"--out {out}: is a directory; name a file")
    if not out.parent.is_dir():
        raise InvalidArgument(f"--out {out}: directory {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK):
        raise InvalidArgument(f"--out {out}: cannot write into {out.parent}")


def _beside(run_dir: Path) -> Path:
    """Where default outputs go: the run directory (the model file's directory when given one)."""
    return run_dir.parent if run_dir.is_file() else run_dir


def _write_csv(out: str, ids, labels) -> None:
    import io

    from saintpipe.core.files import write_atomic

    header = "node,label" if labels.ndim == 1 else "node," + ",".join(f"label_{c}" for c in range(labels.shape[1]))
    buf = io.StringIO()
    buf.write(header + "\n")
    rows = labels[:, None] if labels.ndim == 1 else labels
    for node, row in zip(ids.tolist(), rows.tolist(), strict=True):
        buf.write(f"{node}," + ",".join(str(v) for v in row) + "\n")
    if out == "-":
        sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
    else:
        write_atomic(out, buf.getvalue().encode())
