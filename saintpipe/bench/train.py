"""``saintpipe bench train``: one training iteration with the scheduled matmul order vs both fixed orders.

Table 3's setting of the GraphSAINT parallel-training paper (a 2-layer GraphSAGE, and a GCN where the order
matters most), the three orders taking turns round by round: median time per iteration with its spread, the
multiply-accumulates executed, and each fixed order's time relative to the scheduled one (docs/benchmarks/train.md).
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer, real, seed
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser(
        "train",
        help="time one training iteration: scheduled vs fixed matmul orders",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--nodes", type=integer(1, 2**24), default=8000, help="subgraph nodes (default 8000)")
    parser.add_argument("--degree", type=real(0, 2**24, min_open=True), default=15.0, help="mean degree (default 15)")
    parser.add_argument("--classes", type=integer(1, 2**20), default=121, help="labels, multi-label (default 121)")
    parser.add_argument("--sage-features", type=integer(1, 2**20), default=50)
    parser.add_argument("--sage-hidden", type=integer(2, 2**20), default=512, help="even (self and neighbour halves)")
    parser.add_argument("--gcn-features", type=integer(1, 2**20), default=500)
    parser.add_argument("--gcn-hidden", type=integer(1, 2**20), default=16)
    parser.add_argument(
        "--repeats", type=integer(1, 1_000_000), default=5,
        help="timed rounds; each times one iteration of every order (default 5)",
    )
    parser.add_argument("--warmup", type=integer(0, 1_000_000), default=1,
                        help="rounds run first and discarded (default 1)")
    parser.add_argument("--threads", type=integer(0, 4096), default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu",
                        help="torch device: cpu (default), cuda, cuda:1, ... or auto (cuda when torch sees one)")
    parser.add_argument("--seed", type=seed(), default=0)
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    from saintpipe.core.report import emit_report
    from saintpipe.core.errors import InvalidArgument
    from saintpipe.bench.train_core import run_benchmark

    if args.sage_hidden % 2:
        raise InvalidArgument(
            f"--sage-hidden must be even (self and neighbour halves), got {args.sage_hidden}"
        )
    rows, params, summary = run_benchmark(args)
    emit_report("train", rows, params=params, summary=summary, as_json=args.json)
    return 0
