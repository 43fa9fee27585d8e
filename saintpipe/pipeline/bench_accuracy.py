"""``saintpipe bench accuracy``: test accuracy of random-walk subgraph training vs full-batch, over seeds.

Cora and CiteSeer (standard public split, shipped in tests/data/); for each
seed: full-batch training, training on GraphSAINT random-walk subgraphs with
aggregator and loss normalization, and the same without normalization. Prints
mean ± std of the test accuracy at the best validation accuracy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import SEED_MAX, integer
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser(
        "accuracy",
        help="subgraph training vs full-batch accuracy on Cora/CiteSeer",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--datasets", default="cora,citeseer", help="comma-separated names of NAME.npz files")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where the .npz files are")
    parser.add_argument("--seeds", type=integer(1, 1000), default=5, help="number of seeds, 1 to 1000 (default 5)")
    # Room for --seeds (at most 1000) above the first one: every seed stays a valid seed.
    parser.add_argument("--first-seed", type=integer(0, SEED_MAX - 1000), default=0,
                        help="seeds FIRST..FIRST+N-1 (default 0)")
    parser.add_argument("--epochs", type=integer(1, 1_000_000), default=100)
    parser.add_argument("--arch", default="gcn", choices=["gcn", "sage", "gat", "mixhop"])
    parser.add_argument("--hidden", default="64,64", help="graph layer widths, e.g. 64,64")
    parser.add_argument("--roots", type=integer(1, 2**31 - 1), default=300, help="random-walk roots per subgraph")
    parser.add_argument("--walk-length", type=integer(0, 10_000), default=2)
    parser.add_argument(
        "--norm-subgraphs", type=integer(1, 10_000_000), default=200, help="pre-sampled subgraphs for normalization"
    )
    parser.add_argument("--threads", type=integer(0, 4096), default=0, help="torch threads (0: torch's default)")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    import torch

    from saintpipe.core.report import emit_report
    from saintpipe.core.errors import InvalidArgument
    from saintpipe.pipeline.accuracy import SamplingSetup, compare
    from saintpipe.trainer.config import ModelConfig

    if args.seeds < 1 or args.epochs < 1 or args.first_seed < 0:
        raise InvalidArgument(
            f"--seeds and --epochs must be >= 1 and --first-seed >= 0 (got {args.seeds}, "
            f"{args.epochs}, {args.first_seed})"
        )
    try:
        hidden = [int(h) for h in args.hidden.split(",")]
    except ValueError:
        raise InvalidArgument(f"--hidden {args.hidden!r}: expected comma-separated integers") from None
    datasets = {name: args.data_dir / f"{name}.npz" for name in args.datasets.split(",") if name}
    for name, path in datasets.items():
        if not path.is_file():
            raise InvalidArgument(f"--datasets: {path} not found (dataset {name!r})")
    if args.threads:
        torch.set_num_threads(args.threads)
    model = ModelConfig(arch=args.arch, hidden=hidden, dropout=0.5, lr=0.01, weight_decay=5e-4)
    sampling = SamplingSetup(
        roots=args.roots, walk_length=args.walk_length, norm_subgraphs=args.norm_subgraphs
    )
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    rows = compare(datasets, seeds, args.epochs, model, sampling)
    by_key = {(r["dataset"], r["training"]): r for r in rows}
    summary = {}
    for name in datasets:
        full = by_key[(name, "full-batch")]["test_mean"]
        summary[f"{name}_rw_norm_minus_full_points"] = 100 * (by_key[(name, "rw+norm")]["test_mean"] - full)
        summary[f"{name}_rw_no_norm_minus_full_points"] = 100 * (
            by_key[(name, "rw (no norm)")]["test_mean"] - full
        )
    params = {
        "arch": args.arch,
        "hidden": args.hidden,
        "epochs": args.epochs,
        "seeds": seeds,
        "roots": args.roots,
        "walk_length": args.walk_length,
        "norm_subgraphs": args.norm_subgraphs,
    }
    emit_report("accuracy", rows, params=params, summary=summary, as_json=args.json)
    return 0
