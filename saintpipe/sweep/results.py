"""What a sweep leaves: ``results.json`` and ``results.csv`` in the sweep directory, sorted by best validation.

One row per trial that ended: its settings, its best validation score, the test score of those weights
(the trial's own final scoring; for a trial stopped before it, such as by ASHA, the score its ``best.pt``
holds: :func:`best_test_score`), its steps, how it ended (finished, early stopped, ASHA, failed,
interrupted), how often its trainer was restarted after it died, its run directory and its pool group's account
(produced, acknowledged, waiting, pending, dead-lettered) read just before the group was removed. The
files are rewritten each time a trial ends, so an interrupted sweep keeps what was done
(``saintpipe sweep --resume`` reads them back).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from saintpipe.core.files import write_atomic

log = logging.getLogger(__name__)

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
TRIALS = "trials"
# How a trial ended; the first three count as done (a resumed sweep does not run them again).
DONE = ("finished", "early stopped", "ASHA")


@dataclass
class TrialRow:
    """One trial's line of the table."""

    trial: str
    settings: dict[str, Any]
    best_val: float
    test_score: float
    steps: int
    stopped_by: str
    run_dir: str
    pool: dict[str, int] = field(default_factory=dict)
    error: str = ""
    restarts: int = 0  # its trainer died and was restarted from its latest checkpoint this many times

    @property
    def done(self) -> bool:
        return self.stopped_by in DONE


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and value is not None else math.nan


def _sort_key(row: TrialRow) -> tuple[bool, float, str]:
    return (math.isnan(row.best_val), -row.best_val if not math.isnan(row.best_val) else 0.0, row.trial)


class Results:
    """The sweep directory's table: rows by trial id, written on every change."""

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = sweep_dir
        self.rows: dict[str, TrialRow] = {}

    @classmethod
    def read(cls, sweep_dir: Path) -> Results:
        """The table an earlier run of the sweep left (empty when there is none)."""
        results = cls(sweep_dir)
        path = sweep_dir / RESULTS_JSON
        if path.is_file():
            for raw in json.loads(path.read_text())["trials"]:
                raw["best_val"], raw["test_score"] = _number(raw["best_val"]), _number(raw["test_score"])
                row = TrialRow(**raw)
                results.rows[row.trial] = row
        return results

    def sorted(self) -> list[TrialRow]:
        return sorted(self.rows.values(), key=_sort_key)

    def add(self, row: TrialRow) -> None:
        self.rows[row.trial] = row
        self.write()

    def write(self) -> None:
        rows = self.sorted()
        as_json = [{**asdict(r), "best_val": _finite(r.best_val), "test_score": _finite(r.test_score)} for r in rows]
        write_atomic(self.sweep_dir / RESULTS_JSON, (json.dumps({"trials": as_json}, indent=2) + "\n").encode())
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["trial", "settings", "best_val", "test_score", "steps", "stopped_by", "restarts", "run_dir"])
        for r in rows:
            writer.writerow([r.trial, settings_text(r.settings), _cell(r.best_val), _cell(r.test_score), r.steps,
                             r.stopped_by, r.restarts, r.run_dir])
        write_atomic(self.sweep_dir / RESULTS_CSV, out.getvalue().encode())

    def table(self) -> str:
        """The table as text, best first."""
        rows = self.sorted()
        head = ("trial", "best val", "test", "steps", "stopped by", "restarts", "settings")
        body = [(r.trial, _cell(r.best_val), _cell(r.test_score), str(r.steps), r.stopped_by, str(r.restarts),
                 settings_text(r.settings)) for r in rows]
        widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head) - 1)]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1]
                         for line in [head, *body])


def best_test_score(run_dir: Path) -> float:
    """The test score of the trial's best weights, as its ``best.pt`` holds it (NaN: no readable best.pt).

    The trainer scores the validation and the test split in one full-graph pass (trainer/loop.py) and, when
    the validation score is a new best, keeps those weights in ``best.pt`` with that pass's test score; a
    finished trial's final scoring reports the very same figure. A trial Tune stopped (ASHA) never got to
    its final scoring, but its ``best.pt`` has it.
    """
    from saintpipe.core.errors import DatasetError
    from saintpipe.trainer.run_dir import BEST
    from saintpipe.trainer.run_dir.model_file import load_model

    path = run_dir / BEST
    if not path.is_file():
        return math.nan
    try:
        value = load_model(path).meta.get("test_score")
    except DatasetError as exc:  # damaged or foreign: the row goes on without its test score
        log.warning("%s", exc)
        return math.nan
    return _number(value)


def settings_text(settings: dict[str, Any]) -> str:
    return " ".join(f"{k}={_setting(v)}" for k, v in settings.items())


def _setting(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value, separators=(",", ":"))


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def _cell(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.4f}"
