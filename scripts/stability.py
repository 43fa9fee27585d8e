#!/usr/bin/env python3
"""Measured stability of ``saintpipe run``: loss spikes per sampler and dataset, two normalizations.

For every dataset and sampler it runs the real console script, ``saintpipe run --json``, once per
normalization (default: ``auto`` and ``reference``), one run at a time, each from its own config file with
early stopping off and a time budget. It prints a table and, as its last line, one JSON object with
``<dataset>_<sampler>[_<normalization>]_loss_spike_ratio`` and the same for best/final validation and steps.
The columns (spike ratio, ep1, local): docs/benchmarks/stability.md.

Usage::

    .venv/bin/python scripts/stability.py                          # 3 datasets x 4 samplers x 2 normalizations
    .venv/bin/python scripts/stability.py --datasets cora --samplers node edge --max-seconds 30
    .venv/bin/python scripts/stability.py --keep runs/             # also keep every run's --json output

Cora and CiteSeer are imported from tests/data/*.npz into ``--data-dir`` on first use; a dataset directory
may be named instead (``--datasets /path/to/dataset``). The demo is ``saintpipe run``'s default dataset.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from saintpipe.trainer.losses import loss_spike

ROOT = Path(__file__).resolve().parents[1]
SAMPLERS = ("random_walk", "node", "edge", "frontier")
BUNDLED = {"cora": ROOT / "tests/data/cora.npz", "citeseer": ROOT / "tests/data/citeseer.npz"}

# Sampler parameters per graph size: subgraphs of about the same size for every sampler (~3,000 nodes on the
# demo, ~1,100 on Cora and CiteSeer; the frontier's budget counts pops, not distinct nodes, hence its larger n).
SAMPLER_PARAMS: dict[str, dict[str, dict[str, int | str]]] = {
    "large": {
        "random_walk": {"kind": "random_walk", "roots": 1000, "walk_length": 2},
        "node": {"kind": "node", "node_budget": 3000},
        "edge": {"kind": "edge", "edge_budget": 1500},
        "frontier": {"kind": "frontier", "frontier_size": 300, "node_budget": 3000},
    },
    "small": {
        "random_walk": {"kind": "random_walk", "roots": 550, "walk_length": 2},
        "node": {"kind": "node", "node_budget": 1500},
        "edge": {"kind": "edge", "edge_budget": 750},
        "frontier": {"kind": "frontier", "frontier_size": 300, "node_budget": 2500},
    },
}
# Graphs below this many nodes get the "small" parameters.
SMALL_GRAPH_NODES = 10_000
# The model on the small citation graphs: Kipf and Welling's GCN recipe. The local run's default model
# memorises their 140 training nodes within ~20 epochs, and then any ordinary step is a "spike" of 10^5.
SMALL_GRAPH_MODEL: dict[str, object] = {"arch": "gcn", "hidden": [16, 16], "dropout": 0.5, "weight_decay": 5e-4}
# Steps before a step that ``local`` compares it with.
LOCAL_WINDOW = 50


@dataclass(frozen=True)
class Case:
    """One ``saintpipe run``: a dataset, a sampler, a normalization."""

    dataset: str
    data: Path | None  # None: the demo dataset (saintpipe run's default)
    small: bool
    sampler: str
    normalization: str
    overrides: tuple[tuple[str, object], ...] = ()  # sampler parameters set with --param


@dataclass(frozen=True)
class Figures:
    """What one run's ``--json`` summary says about its stability."""

    loss_spike_ratio: float
    epoch1_ratio: float
    local_ratio: float
    largest: float
    median: float
    share_above_10x: float
    best_val: float
    best_val_epoch: float
    final_val: float
    steps: int
    epochs: int
    stopped_by: str
    metric: str


def local_spike_ratio(losses: np.ndarray, window: int = LOCAL_WINDOW) -> float:
    """The largest ratio of a step's loss to the median loss of the ``window`` steps before it.

    NaN when there are no more than ``window`` steps; inf when a loss is not finite (a diverged step).
    """
    if losses.size <= window:
        return math.nan
    if not np.isfinite(losses).all():
        return math.inf
    before = np.median(np.lib.stride_tricks.sliding_window_view(losses[:-1], window), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(before > 0, losses[window:] / before, np.where(losses[window:] > 0, np.inf, 1.0))
    return float(ratios.max())


def figures(summary: dict) -> Figures:
    """The stability figures of one run's ``--json`` summary."""
    losses = np.asarray(summary["step_losses"], dtype=np.float64)
    epochs = np.asarray(summary["step_epochs"], dtype=np.int64)
    spike = loss_spike(losses, epochs)
    after = losses[losses.size - spike.steps:]
    share = float(np.mean(after > 10 * spike.median)) if after.size and math.isfinite(spike.median) else math.nan
    history = summary.get("val_history") or []
    return Figures(
        loss_spike_ratio=float(summary["loss_spike_ratio"]),
        epoch1_ratio=loss_spike(losses, epochs, warmup_fraction=0.0).ratio, local_ratio=local_spike_ratio(losses),
        largest=spike.largest, median=spike.median, share_above_10x=share,
        best_val=max((v for _, v in history), default=math.nan),
        best_val_epoch=float(summary.get("best_val_epoch", math.nan)),
        final_val=float(history[-1][1]) if history else math.nan,
        steps=int(summary["steps"]), epochs=int(summary["epochs"]), stopped_by=str(summary["stopped_by"]),
        metric=str(summary.get("metric", "accuracy")))


def dataset_dir(name: str, data_dir: Path, saintpipe: list[str]) -> tuple[Path | None, bool]:
    """The dataset directory of ``name`` (None: the demo) and whether the small-graph settings apply."""
    if name == "demo":
        return None, False
    if name in BUNDLED:
        out = data_dir / name
        if not (out / "manifest.json").is_file():
            subprocess.run([*saintpipe, "data", "import", "npz", str(BUNDLED[name]), "--out", str(out), "--force"],
                           check=True, stdout=subprocess.DEVNULL)
        path = out
    else:
        path = Path(name)
        if not (path / "manifest.json").is_file():
            raise SystemExit(f"stability: --datasets {name}: not demo, cora, citeseer or a dataset directory "
                             f"(no {path / 'manifest.json'})")
    nodes = json.loads((path / "manifest.json").read_text())["num_nodes"]
    return path, nodes < SMALL_GRAPH_NODES


def config_text(case: Case, max_seconds: float, epochs: int) -> str:
    """The TOML of one case: early stopping off, no progress bars, checkpoints and metrics endpoints off."""
    lines = ["[run]", f"max_seconds = {max_seconds}", "progress = false", "checkpoints = false", "metrics = false"]
    if case.data is not None:
        lines.append(f'data = "{case.data}"')
    lines += ["[trainer]", f"epochs = {epochs}", f"patience = {epochs}"]
    if case.small:
        lines.append("[trainer.model]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in SMALL_GRAPH_MODEL.items()]
    lines += ["[samplers]", f'normalization = "{case.normalization}"', "[samplers.sampler]"]
    params = {**SAMPLER_PARAMS["small" if case.small else "large"][case.sampler], **dict(case.overrides)}
    lines += [f"{key} = {json.dumps(value)}" for key, value in params.items()]
    return "\n".join(lines) + "\n"


def run_case(case: Case, workdir: Path, saintpipe: list[str], max_seconds: float, epochs: int) -> dict:
    """Run ``saintpipe run --json`` for one case and return its summary (the last line of stdout)."""
    config = workdir / f"{case.dataset}_{case.sampler}_{case.normalization}.toml"
    config.write_text(config_text(case, max_seconds, epochs))
    # Generous: start-up, the reference pre-pass and the final scoring come on top of max_seconds.
    proc = subprocess.run([*saintpipe, "run", "--config", str(config), "--json"], capture_output=True, text=True,
                          timeout=max_seconds + 600, cwd=workdir)
    if proc.returncode != 0:
        raise RuntimeError(f"saintpipe run --config {config} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt(value: float, digits: int = 1) -> str:
    """A figure for the table: thousands separators, ``n/a`` for NaN, ``inf``."""
    return "n/a" if math.isnan(value) else ("inf" if math.isinf(value) else f"{value:,.{digits}f}")


def print_table(rows: list[tuple[Case, Figures]]) -> None:
    """One line per run, in the order run."""
    head = (f"{'dataset':<10} {'sampler':<12} {'normalization':<13} {'spike ratio':>12} {'ep1':>9} {'local':>9} "
            f"{'largest/median':>18} {'>10x med':>8} {'best val (ep)':>14} {'final val':>9} {'steps':>6} {'ep':>5}")
    print(head)
    print("-" * len(head))
    for case, f in rows:
        print(f"{case.dataset:<10} {case.sampler:<12} {case.normalization:<13} {fmt(f.loss_spike_ratio):>12} "
              f"{fmt(f.epoch1_ratio):>9} {fmt(f.local_ratio):>9} {f'{f.largest:.3g}/{f.median:.3g}':>18} "
              f"{fmt(100 * f.share_above_10x):>7}% {f'{f.best_val:.3f} ({f.best_val_epoch:g})':>14} "
              f"{f.final_val:>9.3f} {f.steps:>6} {f.epochs:>5}")


def summary_keys(rows: list[tuple[Case, Figures]], default: str = "auto") -> dict[str, float | int]:
    """``<dataset>_<sampler>[_<normalization>]_<figure>``; the default normalization has no infix."""
    out: dict[str, float | int] = {}
    for case, f in rows:
        prefix = f"{case.dataset}_{case.sampler}" + ("" if case.normalization == default else f"_{case.normalization}")
        out[f"{prefix}_loss_spike_ratio"] = f.loss_spike_ratio
        out[f"{prefix}_epoch1_loss_spike_ratio"] = f.epoch1_ratio
        out[f"{prefix}_local_loss_spike_ratio"] = f.local_ratio
        out[f"{prefix}_best_val"] = f.best_val
        out[f"{prefix}_final_val"] = f.final_val
        out[f"{prefix}_steps"] = f.steps
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``--help`` says what each flag does)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Runs one saintpipe run at a time; each takes max-seconds plus start-up.")
    parser.add_argument("--datasets", nargs="+", default=["demo", "cora", "citeseer"],
                        help="demo, cora, citeseer or dataset directories (default: demo cora citeseer)")
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS,
                        help="samplers (default: all four)")
    parser.add_argument("--normalizations", nargs="+", default=["auto", "reference"],
                        choices=["auto", "exact", "online", "smoothed", "reference", "none"],
                        help="[samplers] normalization of each run (default: auto reference)")
    parser.add_argument("--max-seconds", type=float, default=45.0, help="[run] max_seconds of each run (default 45)")
    parser.add_argument("--epochs", type=int, default=100_000,
                        help="[trainer] epochs and patience (early stopping off; default 100000: max-seconds ends it)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where Cora and CiteSeer are imported (default: a temporary directory)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="write every run's --json summary here as <dataset>_<sampler>_<normalization>.json")
    parser.add_argument("--param", action="append", default=[], metavar="SAMPLER.KEY=VALUE",
                        help="set a sampler parameter, e.g. node.uniform_mix=0.5 (repeatable; VALUE is JSON)")
    parser.add_argument("--json", action="store_true", help="print only the JSON summary")
    args = parser.parse_args(argv)
    args.overrides = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        sampler, dot, field = key.partition(".")
        if not (sep and dot and field) or sampler not in SAMPLERS:
            parser.error(f"--param {item}: expected SAMPLER.KEY=VALUE with SAMPLER one of {', '.join(SAMPLERS)}")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        args.overrides.setdefault(sampler, []).append((field, parsed))
    if not (args.max_seconds > 0 and args.epochs >= 1):
        parser.error("--max-seconds must be > 0 and --epochs >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    saintpipe = [str(Path(sys.executable).parent / "saintpipe")]
    rows: list[tuple[Case, Figures]] = []
    with tempfile.TemporaryDirectory(prefix="saintpipe-stability-") as tmp:
        work = Path(tmp)
        data_dir = args.data_dir or work / "data"
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        for name in args.datasets:
            path, small = dataset_dir(name, data_dir, saintpipe)
            label = name if path is None or name in BUNDLED else path.name
            for sampler in args.samplers:
                for norm in args.normalizations:
                    case = Case(label, path, small, sampler, norm, tuple(args.overrides.get(sampler, ())))
                    started = time.monotonic()
                    summary = run_case(case, work, saintpipe, args.max_seconds, args.epochs)
                    if args.keep:
                        (args.keep / f"{label}_{sampler}_{norm}.json").write_text(json.dumps(summary))
                    rows.append((case, figures(summary)))
                    if not args.json:
                        f = rows[-1][1]
                        print(f"{label} {sampler} {norm}: spike ratio {fmt(f.loss_spike_ratio)}, best val "
                              f"{f.best_val:.3f}, final {f.final_val:.3f}, {f.steps} steps "
                              f"({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    if not args.json:
        print_table(rows)
    print(json.dumps(summary_keys(rows), default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
