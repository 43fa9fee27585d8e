"""Kernels a run with a cold Numba cache needs later, compiled beside it while it starts.

With a cold cache (a fresh install whose set-up did not run ``saintpipe warmup``, or a cleared cache), every
kernel compiles at its first call, and the first subgraph waits for all of them in turn: the normalization
prior's (while the sampler service starts), the sampling kernels (in the sampler worker), the codec's (the
worker sealing the subgraph, then the trainer decoding it). The runner then starts this module in a process of
its own as soon as it has opened the dataset, to compile the prior's kernels and the codec's, which need neither
Ray nor the sampler: by the time the service and the worker reach them Numba loads them from its cache, and only
the sampling kernels stay on the first subgraph's path. The process writes nothing but Numba's cache, and a run
that ends first stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from saintpipe.core.procutil import spawn


def start_precompile(data: Path, sampler: dict[str, Any], graph: str) -> subprocess.Popen[Any]:
    """Start the precompile process for dataset ``data``, sampler config ``sampler`` (its fields, as
    ``model_dump``) and ``[samplers] graph``; it dies with this process."""
    return spawn([sys.executable, "-m", "saintpipe.pipeline.precompile", "--data", str(data),
                  "--sampler", json.dumps(sampler), "--graph", graph],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def compile_prior(data: Path, sampler: dict[str, Any], graph: str) -> None:
    """Compute the sampler's inclusion-probability prior on the graph the sampler service will sample, as its
    start does (its result is thrown away: only the compiled kernels are kept). Nothing when that graph is the
    training graph and it is not stored yet: building it is the service's job."""
    from saintpipe.services.dataset.sample_graph import full_graph, resolve_graph, training_graph
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.services.dataset.train_graph import load_train_graph
    from saintpipe.services.sampler.config import parse_sampler_config
    from saintpipe.services.sampler.inclusion import inclusion_probabilities

    dataset = open_dataset(data)
    if resolve_graph(graph, dataset.manifest.sample_graph) == "full":
        sample_graph = full_graph(dataset)
    else:
        stored = load_train_graph(dataset.path, dataset.manifest, checksums=False)
        if stored is None:
            return
        sample_graph = training_graph(dataset, stored)
    inclusion_probabilities(parse_sampler_config(sampler), sample_graph.indptr, sample_graph.indices)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m saintpipe.pipeline.precompile", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="the run's dataset directory")
    parser.add_argument("--sampler", type=json.loads, required=True, help="the [samplers.sampler] fields as JSON")
    parser.add_argument("--graph", default="auto", help="[samplers] graph")
    args = parser.parse_args(argv)
    from saintpipe.services.pool.codec.warm import compile_codec

    # In the order the run needs them: the prior when the sampler service starts, the codec at the first seal.
    compile_prior(args.data, args.sampler, args.graph)
    # Until the first seal the sampler worker's own compiling is the first subgraph's path, and the trainer's
    # start runs beside it: both go first (measured: compiled at full priority, or with the sampling kernels in a
    # second process, the 2 cores' contention delays the trainer and the first step).
    os.nice(10)
    compile_codec()
    return 0


if __name__ == "__main__":
    sys.exit(main())
