"""``saintpipe bench …``: benchmarks that print their figures (a table, or one JSON object with --json)."""

from __future__ import annotations

import argparse
import importlib

# One module per benchmark, all in saintpipe.bench, each named for what it measures; each defines
# register(subparsers). The subcommand is the module's name (sampler_service: sampler-service;
# dataset_import: import).
BENCHMARKS: tuple[str, ...] = (
    "saintpipe.bench.kernels",  # the sampler kernels (alias: sampler)
    "saintpipe.bench.sampler_service",  # the sampler service filling the pool (alias: samplers)
    "saintpipe.bench.pool",
    "saintpipe.bench.features",  # the feature service
    "saintpipe.bench.train",  # the trainer's iteration
    "saintpipe.bench.inference",
    "saintpipe.bench.accuracy.cli",
    "saintpipe.bench.loader",
    "saintpipe.bench.startup",  # a whole run: start-up and the trainer's step
    "saintpipe.bench.sweep",  # one sweep against separate runs of the same configurations
    "saintpipe.bench.generate",  # the Kronecker generator
    "saintpipe.bench.dataset_import",  # text edge-list import
)


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser("bench", help="run a benchmark and print its figures",
                               description="Benchmarks, each named for what it measures. Each prints a table, "
                               "or one JSON object with --json (loader: lines of figures).")
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name in BENCHMARKS:
        importlib.import_module(name).register(sub)
