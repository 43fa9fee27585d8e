"""``saintpipe bench inference``: layer-wise full-graph inference on a power-law (Kronecker) graph.

A 2-layer GNN with random weights on an R-MAT graph of 2^scale nodes: the one-pass forward, layer-wise
inference with the layer outputs in memory and in memory-mapped files (each checked against the one pass),
and one sparse-dense product of the whole graph per layer as the baseline. Method: docs/benchmarks/inference.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

BASELINE = "baseline: one sparse-dense product per layer"
HOP_ROWS = 2**20  # output rows whose 1-hop and 2-hop input rows are counted (the blocks starting below it)


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer, real, seed
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser(
        "inference",
        help="time layer-wise full-graph inference on a power-law graph",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--scale", type=integer(4, 30), default=16, help="2^scale nodes (default 16)")
    parser.add_argument("--degree", type=real(0, 4096, min_open=True), default=16.0, help="mean degree (default 16)")
    parser.add_argument("--features", type=integer(1, 2**16), default=64, help="input features (default 64)")
    parser.add_argument("--hidden", type=integer(1, 2**16), default=120,
                        help="hidden width (default 120: divisible by every architecture's paths)")
    parser.add_argument("--classes", type=integer(1, 2**16), default=8, help="classes (default 8)")
    parser.add_argument("--arch", choices=("sage", "gcn", "gat", "mixhop"), default="sage",
                        help="the model's layers (default sage; gat: 4 heads, mixhop: powers 0, 1, 2)")
    parser.add_argument("--block-rows", type=integer(1, 2**31 - 1), default=65_536, help="rows per block")
    parser.add_argument("--block-mb", type=integer(1, 2**20), default=256,
                        help="about the most one block holds, MiB (default 256)")
    parser.add_argument("--repeats", type=integer(1, 1000), default=3, help="timed runs per mode (default 3)")
    parser.add_argument("--threads", type=integer(0, 4096), default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--seed", type=seed(), default=0)
    parser.add_argument("--no-one-pass", action="store_true",
                        help="leave out the one-pass forward (and the comparison with it): for graphs where it does "
                             "not fit in memory, see the one-pass memory estimate in the summary")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    import statistics
    import time

    import numpy as np
    import torch

    from saintpipe.core.errors import InvalidArgument
    from saintpipe.core.report import emit_report
    from saintpipe.services.dataset.kronecker import kronecker_topology
    from saintpipe.trainer.config import ModelConfig
    from saintpipe.trainer.evaluate import EvalGraph, estimate_full_bytes
    from saintpipe.trainer.row_blocks import block_bounds, hop_counts
    from saintpipe.trainer.inference import InferenceLimits, LayerwiseInference
    from saintpipe.trainer.models import build_model
    from saintpipe.trainer.ops import spmm
    from saintpipe.trainer.sparse import SparseOperand

    parts = {"sage": 2, "gat": 4, "mixhop": 3}.get(args.arch, 1)
    if args.hidden % parts:
        raise InvalidArgument(f"--hidden must be divisible by {parts} for --arch {args.arch}, got {args.hidden}")
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    indptr, indices = kronecker_topology(args.scale, args.degree, rng)
    n = indptr.size - 1
    features = rng.standard_normal((n, args.features), dtype=np.float32)
    graph = EvalGraph.from_arrays(indptr, indices, features, np.zeros(n, np.int64), {"train": np.arange(1)})
    torch.manual_seed(args.seed)
    model = build_model(ModelConfig(arch=args.arch, hidden=[args.hidden, args.hidden]), args.features,
                        args.classes, False).eval()

    def one_pass() -> np.ndarray:
        with torch.no_grad():
            return model(graph.full_batch()).numpy()

    modes: dict[str, Callable[[], object]] = {
        **({} if args.no_one_pass else {"one pass": one_pass}),
        "layer-wise, outputs in memory": lambda: LayerwiseInference(
            model, graph, InferenceLimits(args.block_rows, args.block_mb << 20)).logits(),
        "layer-wise, outputs in files": lambda: LayerwiseInference(
            model, graph, InferenceLimits(args.block_rows, args.block_mb << 20, spill_bytes=0)).logits(),
    }
    reference = None if args.no_one_pass else one_pass()
    # The floor layer-wise inference is held to (at most 3x): per layer, one sparse-dense product of the
    # whole graph's mean aggregator with a dense matrix as wide as that layer's input, with the same spmm kernel.
    mean = np.repeat(1.0 / np.maximum(np.diff(indptr), 1), np.diff(indptr)).astype(np.float32)
    op = SparseOperand.from_csr(indptr, indices, mean, mean)  # the weights and their transpose: the same array
    # The first layer's input is the features themselves; the second's is made only for the baseline's turn and
    # dropped after it, so that it does not sit next to layer-wise inference's own layer outputs (4.3 GB each at
    # scale 24 and width 64).
    inputs: list = []

    def products() -> None:
        with torch.no_grad():
            for x in inputs:
                spmm(op, x)

    modes[BASELINE] = products
    rows, median = [], {}
    for name, fn in modes.items():
        if name == BASELINE:
            inputs[:] = [torch.from_numpy(features),
                         torch.from_numpy(rng.standard_normal((n, args.hidden), dtype=np.float32))]
        fn()  # warm-up: Numba's kernels load, torch allocates
        times, out = [], None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        inputs.clear()
        median[name] = statistics.median(times)
        rows.append({"mode": name, "median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
                     "max_abs_diff": None if out is None or reference is None
                     else float(np.abs(out - reference).max())})
    # Input rows a block reads, summed over blocks: its 1-hop sources (layer-wise) vs its 2-hop neighbourhood (the
    # k-hop form, which also induced each one's subgraph), over the first layer's blocks (at most 64 of them, those
    # starting below row HOP_ROWS: on a scale-24 graph 64 blocks' 2-hop neighbourhoods are most of the graph).
    per_unit = 4 * (args.features + args.hidden) + 12 + (16 * 4 if args.arch == "gat" else 0)  # as inference cuts
    cuts = block_bounds(indptr, args.block_rows, max(1, (args.block_mb << 20) // per_unit))
    one_hop = two_hop = 0
    blocks = list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True))[:64]
    blocks = [(a, b) for a, b in blocks if a < HOP_ROWS] or blocks[:1]
    seen = np.zeros(n, dtype=np.int32)
    for stamp, (a, b) in enumerate(blocks, start=1):
        one, two = hop_counts(indptr, indices, a, b, seen, stamp)
        one_hop += one
        two_hop += two
    covered = int(cuts[len(blocks)])
    summary = {
        "nodes": n, "edges (directed)": int(indices.size), "max degree": int(np.diff(indptr).max()),
        "blocks per pass": int(cuts.size - 1),
        "input rows read per output row, 1 hop (layer-wise)": round(one_hop / covered, 2),
        "input rows per output row, 2 hops (k-hop form)": round(two_hop / covered, 2),
        "one-pass memory estimate (MB)": round(estimate_full_bytes(graph, model) / 1e6, 1),
        "layer-wise (in memory) / one spmm per layer": round(median["layer-wise, outputs in memory"]
                                                             / median[BASELINE], 2),
        "layer-wise (in files) / one spmm per layer": round(median["layer-wise, outputs in files"]
                                                            / median[BASELINE], 2),
        "layer-wise bound (MB): layer input + output + 1 block": round(
            (n * 4 * max(args.features + args.hidden, 2 * args.hidden) + (args.block_mb << 20)) / 1e6, 1),
    }
    params = {k: getattr(args, k) for k in ("arch", "scale", "degree", "features", "hidden", "classes", "block_rows",
                                            "block_mb", "repeats", "threads", "seed", "no_one_pass")}
    emit_report("inference", rows, params=params, summary=summary, as_json=args.json)
    return 0
