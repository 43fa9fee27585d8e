#!/usr/bin/env python3
"""Plot the step losses and validation curves of two or more ``saintpipe run --json`` outputs into one PNG.

Top panel: every optimizer step's training loss (log scale) against the epoch, one line per run.
Bottom panel: the validation score of every validation (``val_history``). Each input is a file holding
the run's ``--json`` output (its whole stdout is fine: the last line that is a JSON object is read),
optionally labelled ``LABEL=PATH``. For each run it also prints the figures the plot shows: the largest
and median step loss after the first epoch, the share of those steps above ten times the median, the
best validation score and the one at the end.

Usage::

    saintpipe run --config before.toml --json > before.txt
    saintpipe run --config after.toml --json > after.txt
    .venv/bin/python scripts/plot_losses.py "reference floors=before.txt" "auto=after.txt" --out loss.png

Needs matplotlib (the ``plots`` extra: ``pip install 'saintpipe[plots]'``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from saintpipe.trainer.losses import loss_spike


@dataclass(frozen=True)
class Run:
    """One run's curves, read from its ``--json`` summary."""

    label: str
    losses: np.ndarray  # float64 [steps]
    epochs: np.ndarray  # int64 [steps], 0-based epoch of each step
    val: np.ndarray  # float64 [validations, 2]: epoch, score
    metric: str


def read_summary(path: Path) -> dict:
    """The last line of ``path`` that is a JSON object (``saintpipe run --json`` prints it last).

    Raises:
        SystemExit: naming the file when it holds no such line or it lacks the step losses.
    """
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SystemExit(f"plot_losses: {path}: {exc.strerror}") from None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                summary = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "step_losses" not in summary or "step_epochs" not in summary:
                raise SystemExit(f"plot_losses: {path}: the JSON summary has no step_losses/step_epochs "
                                 "(a saintpipe run from before issue 21?)")
            return summary
    raise SystemExit(f"plot_losses: {path}: no JSON summary line (run saintpipe run with --json)")


def load_run(spec: str) -> Run:
    """``LABEL=PATH`` or ``PATH`` (labelled with the file's stem)."""
    label, sep, path = spec.partition("=")
    if not sep:
        label, path = Path(spec).stem, spec
    summary = read_summary(Path(path))
    val = np.asarray(summary.get("val_history") or [], dtype=np.float64).reshape(-1, 2)
    return Run(label, np.asarray(summary["step_losses"], dtype=np.float64),
               np.asarray(summary["step_epochs"], dtype=np.int64), val, str(summary.get("metric", "accuracy")))


def step_positions(epochs: np.ndarray) -> np.ndarray:
    """Each step's position in epochs: its epoch plus its fraction of that epoch's steps."""
    pos = epochs.astype(np.float64)
    if epochs.size == 0:
        return pos
    starts = np.flatnonzero(np.r_[True, epochs[1:] != epochs[:-1]])
    counts = np.diff(np.r_[starts, epochs.size])
    within = np.arange(epochs.size) - np.repeat(starts, counts)
    return pos + within / np.repeat(counts, counts)


def describe(run: Run) -> str:
    """The figures of one run, as one line."""
    spike = loss_spike(run.losses, run.epochs, after_epoch=1)
    after = run.losses[run.epochs >= 1]
    above = float(np.mean(after > 10 * spike.median)) if after.size else math.nan
    best = float(run.val[:, 1].max()) if run.val.size else math.nan
    best_at = float(run.val[int(run.val[:, 1].argmax()), 0]) if run.val.size else math.nan
    last = run.val[-1] if run.val.size else (math.nan, math.nan)
    return (f"{run.label}: {run.losses.size} steps, largest step loss {spike.largest:.4g}, median {spike.median:.4g} "
            f"(after epoch 1), ratio {spike.ratio:.4g}, {100 * above:.1f}% of steps above 10x the median; "
            f"val {run.metric} best {best:.3f} (epoch {best_at:g}), at the end {last[1]:.3f} (epoch {last[0]:g})")


def plot(runs: list[Run], out: Path, title: str | None) -> None:
    import matplotlib

    matplotlib.use("Agg")  # a file, no display
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True, height_ratios=(3, 2))
    # A log scale cannot draw a zero loss (a memorised subgraph rounds to 0.0 in float32): such steps are drawn
    # at the smallest positive loss of all runs, so they do not stretch the axis to 1e-38.
    positive = [run.losses[run.losses > 0] for run in runs]
    floor = min((float(p.min()) for p in positive if p.size), default=1e-12)
    for run in runs:
        top.plot(step_positions(run.epochs), np.maximum(run.losses, floor), lw=0.7, alpha=0.85, label=run.label)
        if run.val.size:
            bottom.plot(run.val[:, 0], run.val[:, 1], lw=1.2, label=run.label)
    top.set_yscale("log")
    top.set_ylabel("training loss per step (log)")
    top.grid(True, which="major", alpha=0.3)
    top.legend(loc="upper right")
    if title:
        top.set_title(title)
    metric = runs[0].metric
    bottom.set_ylabel(f"validation {metric}")
    bottom.set_xlabel("epoch")
    bottom.grid(True, alpha=0.3)
    bottom.legend(loc="best")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("runs", nargs="+", metavar="[LABEL=]PATH",
                        help="a file with a saintpipe run --json output (two or more)")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--title", default=None, help="title over the loss panel")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give two or more runs to compare")
    runs = [load_run(spec) for spec in args.runs]
    for run in runs:
        print(describe(run))
    plot(runs, args.out, args.title)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
