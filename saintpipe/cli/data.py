"""``saintpipe data …``: import, generate, inspect and verify datasets."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser("data", help="import, generate, inspect and verify datasets",
                               description="Dataset commands. Every command that writes a dataset takes --out DIR.")
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    gen = sub.add_parser("generate", help="generate a synthetic dataset", description="Generate a synthetic dataset.")
    gen_sub = gen.add_subparsers(dest="generator", metavar="GENERATOR", required=True)
    demo = gen_sub.add_parser("demo", help="the built-in demo dataset (planted communities)",
                              description="A labelled graph with planted communities whose labels can be learned.")
    demo.add_argument("--out", type=Path, required=True, help="dataset directory to create")
    demo.add_argument("--nodes", type=int, default=30_000)
    demo.add_argument("--shards", type=int, default=2)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--force", action="store_true", help="replace an existing dataset at --out")
    demo.set_defaults(func=_generate_demo)

    info = sub.add_parser("info", help="print a dataset's summary", description="Print a dataset's summary.")
    info.add_argument("dir", type=Path)
    info.set_defaults(func=_info)


def _generate_demo(args: argparse.Namespace) -> int:
    from services.dataset.demo import generate_demo
    from services.dataset.store import write_dataset

    write_dataset(args.out, num_shards=args.shards, overwrite=args.force,
                  **generate_demo(num_nodes=args.nodes, seed=args.seed))
    print(f"wrote {args.out}")
    return 0


def _info(args: argparse.Namespace) -> int:
    from services.dataset.info import describe
    from services.dataset.store import open_dataset

    print(describe(open_dataset(args.dir)))
    return 0
