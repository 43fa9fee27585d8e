"""``saintpipe serve …``: run one service of the pipeline on its own."""

from __future__ import annotations

import argparse
import importlib

# One module per service; each defines register(subparsers).
SERVICES: tuple[str, ...] = (
    "saintpipe.services.feature_shard.cli", "saintpipe.services.sampler_service.cli", "saintpipe.trainer.cli",
)


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser("serve", help="run one service (feature shard, samplers, trainer)",
                               description="Run one service of the pipeline on its own.")
    sub = parser.add_subparsers(dest="service", metavar="SERVICE", required=True)
    for name in SERVICES:
        importlib.import_module(name).register(sub)
