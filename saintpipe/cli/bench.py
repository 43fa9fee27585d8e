"""``saintpipe bench …``: benchmarks that print their figures (a table, or one JSON object with --json)."""

from __future__ import annotations

import argparse

from saintpipe.cli.registry import register_all

# One module per benchmark; each defines register(subparsers).
BENCHMARKS: tuple[str, ...] = (
    "saintpipe.services.dataset.bench",
    "saintpipe.services.dataset.bench_import",
    "saintpipe.services.feature_shard.bench",
    "saintpipe.pipeline.bench_accuracy",
    "saintpipe.services.sampler_service.bench_kernels",
    "saintpipe.services.pool.bench",
    "saintpipe.trainer.bench",
    "saintpipe.trainer.bench_inference",
    "saintpipe.services.sampler_service.bench",
)


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser("bench", help="run a benchmark and print its figures",
                               description="Benchmarks. Each prints a table, or one JSON object with --json.")
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    register_all(sub, BENCHMARKS)
