"""``saintpipe bench startup``: the demo run from the command to its first step, warm and with a cleared kernel
cache, and the trainer's compute per step inside the run beside the bare model step.

Each mode runs ``saintpipe run --json`` as a user would (a new process, the
demo dataset or ``--data``), for ``--seconds`` of the whole command
(``[run] max_seconds``) with early stopping off: ``warm`` with Numba's cache as
this install has it (compiled first if it is empty: ``saintpipe warmup``),
``cold`` with an empty ``NUMBA_CACHE_DIR``, so that every kernel compiles in
the run. From each run's summary: the seconds from the command to the first
optimizer step and to each part of the start-up, the trainers' share of time
waiting for data, the steady steps/s and the trainer's compute per step (batch
building plus the optimizer step, as the loop measures it). Then, in this
process, the bare model step of the run's model (``[trainer.model]``) on a
random subgraph of the run's mean size (nodes and adjacency entries the
sampler workers drew), median of ``--repeats`` after a warm-up, one torch
thread as the run's trainer has: the ratio of the two says what the run adds
to the model's own step.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("warm", "cold")


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser(
        "startup",
        help="seconds from the command to the first step (warm, and with a cleared kernel cache); "
             "the run's compute per step vs the bare model step",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--data", type=Path, help="dataset directory (default: the demo dataset)")
    parser.add_argument("--seconds", type=integer(10, 3600), default=45,
                        help="each run's whole length, start-up included ([run] max_seconds; default 45)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES),
                        help="warm, cold or both (default both)")
    parser.add_argument("--repeats", type=integer(1, 10_000), default=20,
                        help="timed bare model steps (default 20)")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    from saintpipe.core.report import emit_report

    data = args.data
    if data is None:
        from saintpipe.services.dataset.demo import ensure_demo_dataset

        data = ensure_demo_dataset()
    rows = [run_once(mode, data, args.seconds) for mode in args.modes]
    bare = bare_step_ms(data, rows, args.repeats)
    for row in rows:
        row["bare_step_ms"] = bare
        row["compute_vs_bare"] = row["compute_per_step_ms"] / bare if bare > 0 else math.nan  # NaN > 0 is False
    params = {"data": str(data), "seconds": args.seconds, "repeats": args.repeats}
    emit_report("startup", rows, params=params, as_json=args.json,
                columns=["mode", "first_step_s", "data_wait_pct", "steps_per_s", "compute_per_step_ms",
                         "bare_step_ms", "compute_vs_bare", "subgraph_nodes", "timeline"])
    return 0


def run_once(mode: str, data: Path, seconds: int) -> dict[str, Any]:
    """One ``saintpipe run --json`` in ``mode`` (``warm`` or ``cold``); its figures as a report row."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="saintpipe-bench-startup-") as scratch:
        config = Path(scratch) / "bench.toml"
        config.write_text(f"[run]\nmax_seconds = {seconds}\nprogress = false\n"
                          "[trainer]\nepochs = 100000\npatience = 100000\n")
        if mode == "cold":
            env["NUMBA_CACHE_DIR"] = str(Path(scratch) / "numba")  # empty: every kernel compiles in the run
        else:
            subprocess.run([sys.executable, "-m", "saintpipe", "warmup", "--if-cold"], env=env, check=True)
        command = [sys.executable, "-m", "saintpipe", "run", "--json", "--data", str(data), "--config", str(config),
                   "--run-dir", str(Path(scratch) / "run")]
        began = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"saintpipe run ({mode}) exited {done.returncode}: "
                           f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return row_of(mode, summary, wall)


def row_of(mode: str, summary: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """A report row from a run's ``--json`` summary."""
    t = summary["times"]
    steps = max(1, int(summary["steps"]))
    busy = t["compute"] + t["data_wait"]
    startup = summary.get("startup", {})
    timeline = ", ".join(f"{part} {at:.1f}" for part, at in sorted(startup.items(), key=lambda kv: kv[1]))
    return {
        "mode": mode,
        "first_step_s": startup.get("first step", float("nan")),
        "data_wait_pct": 100 * t["data_wait"] / busy if busy > 0 else float("nan"),
        "steps_per_s": summary["steps"] / summary["training_seconds"] if summary["training_seconds"] else 0.0,
        "compute_per_step_ms": 1e3 * t["compute"] / steps,
        "subgraph_nodes": summary.get("subgraph_nodes", float("nan")),
        "subgraph_edges": summary.get("subgraph_edges", float("nan")),
        "steps": summary["steps"],
        "wall_s": wall_s,
        "timeline": timeline,
    }


def bare_step_ms(data: Path, rows: list[dict[str, Any]], repeats: int) -> float:
    """The median ms of the run's model's training step on a random subgraph of the runs' mean size (NaN
    when no run drew one)."""
    import numpy as np
    import torch

    from saintpipe.bench.train_core import training_step
    from saintpipe.core.rounds import timed
    from saintpipe.pipeline.config import load_pipeline_config
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.trainer.batch import batch_from_subgraph
    from saintpipe.trainer.synthetic import random_subgraph

    drawn = [r for r in rows if not math.isnan(r["subgraph_nodes"]) and r["subgraph_edges"] > 0]
    if not drawn:
        return float("nan")
    nodes = int(round(statistics.fmean(r["subgraph_nodes"] for r in drawn)))
    degree = statistics.fmean(r["subgraph_edges"] for r in drawn) / max(1, nodes)
    dataset = open_dataset(data)
    model_config = load_pipeline_config(None, data=data).trainer.model
    classes = int(dataset.manifest.num_classes)
    torch.set_num_threads(1)  # as the run's trainer actor
    sub = random_subgraph(nodes, degree, seed=0, mean_weights=True)
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(nodes, int(dataset.manifest.feature_dim))).astype(np.float32)
    labels = rng.integers(0, classes, nodes)
    batch = batch_from_subgraph(sub, feats, labels, np.ones(nodes, dtype=bool), np.diff(sub.indptr))
    step = timed(training_step(model_config, batch, classes, 0, torch.device("cpu"), multilabel=False))
    times = [step() for _ in range(repeats + 2)][2:]  # two warm-up steps
    return 1e3 * statistics.median(times)
