"""What a trainer keeps in its run directory: the metrics history and the best and final models.

``metrics.jsonl`` gets one JSON object per line, appended (and flushed to disk)
as training goes, so an interrupted run keeps its history::

    {"event": "validation", "epoch": 3.0, "step": 42, "train_loss": 0.71, "val_score": 0.83,
     "best_val_score": 0.83, "metric": "accuracy", "elapsed_s": 12.4}

``event`` is ``validation`` (every validation: at epoch ends and every ``eval_every_steps`` steps), ``epoch``
(an epoch end without a validation, ``val_score`` null) or ``end`` (once, after the final scoring of the best
weights, with ``test_score``). ``train_loss`` is the mean training loss of the steps since the previous line;
``elapsed_s`` counts training seconds over the whole run, resumed parts included. NaN is written as null
(strict JSON).

When a run resumes from a checkpoint, lines past the checkpoint's step (written before the interruption,
trained again now) are dropped first, so the file stays one history without repeats.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

from saintpipe.core.files import write_atomic
from saintpipe.trainer.run_dir import BEST, FINAL, METRICS
from saintpipe.trainer.run_dir.model_file import DatasetInfo, save_model
from saintpipe.trainer.models import GNN

log = logging.getLogger(__name__)



def _plain(value: object) -> object:
    return None if isinstance(value, float) and not math.isfinite(value) else value


class MetricsLog:
    """``metrics.jsonl``: append a row, read the rows back, cut the history at a step."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def append(self, row: dict) -> None:
        """Add one line and flush it to disk (a crash right after keeps it)."""
        line = json.dumps({k: _plain(v) for k, v in row.items()}, allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def rows(self) -> list[dict]:
        """Every complete line, in order (a line torn by a crash mid-write is skipped)."""
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                out.append(row)
        return out

    def truncate_after(self, step: int) -> int:
        """Drop the lines of steps after ``step``; returns the step of the last line kept (0: none)."""
        rows = self.rows()
        kept = [r for r in rows if isinstance(r.get("step"), int) and r["step"] <= step]
        if self.path.is_file() and len(kept) != len(self.path.read_text(encoding="utf-8").splitlines()):
            text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in kept)
            write_atomic(self.path, text.encode())
            log.info("%s: %d line(s) past step %d dropped (trained again)", self.path, len(rows) - len(kept), step)
        return max((r["step"] for r in kept), default=0)


class RunOutputs:
    """A trainer's files in the run directory (written by the leading rank only).

    Args:
        directory: the run directory (created if missing).
        dataset: what the models were trained on (stored in each model file).
        metric: the validation metric's name, written on every line (default: the dataset's).
    """

    def __init__(self, directory: Path | str, dataset: DatasetInfo, metric: str | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.dataset, self.metric = dataset, metric or dataset.metric
        self.metrics = MetricsLog(self.directory / METRICS)

    def resumed_at(self, step: int) -> int:
        """Training goes on from ``step`` (0: from scratch): later lines go; returns the last line's step."""
        return self.metrics.truncate_after(step)

    def record(self, event: str, **row: object) -> None:
        self.metrics.append({"event": event, **row, "metric": self.metric})

    def save_best(self, model: GNN, **meta: object) -> Path:
        return save_model(self.directory / BEST, model, self.dataset, which="best", metric=self.metric, **meta)

    def save_final(self, model: GNN, **meta: object) -> Path:
        return save_model(self.directory / FINAL, model, self.dataset, which="final", metric=self.metric, **meta)
