"""``saintpipe bench generate``: time and peak memory of the Kronecker generator."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.cli.report import add_json_flag

    parser = sub.add_parser("generate", help="time the Kronecker generator",
                            description="Time and peak memory of `data generate kronecker`.")
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--degree", type=int, default=16)
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    raise NotImplementedError("filled in by the Kronecker generator")
