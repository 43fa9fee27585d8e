"""The sweep's results table: the restarts column in the text table and results.csv, and a results.json written
before the column existed read back with none."""

from __future__ import annotations

import csv
import json
import math

from saintpipe.sweep.results import RESULTS_JSON, Results, TrialRow


def row(trial: str, best: float, stopped_by: str, restarts: int) -> TrialRow:
    return TrialRow(trial, {"model.lr": 0.01}, best, math.nan, 12, stopped_by, f"/s/trials/{trial}",
                    {"produced": 3, "acknowledged": 3, "waiting": 0, "pending": 0, "dead_lettered": 0},
                    "trainer killed 2 times" if stopped_by == "failed" else "", restarts)


def test_the_table_and_the_csv_say_how_often_each_trial_was_restarted(tmp_path):
    results = Results(tmp_path)
    results.add(row("trial-000", 0.9, "finished", 1))
    results.add(row("trial-001", 0.5, "failed", 2))
    lines = results.table().splitlines()
    assert lines[0].split()[:7] == ["trial", "best", "val", "test", "steps", "stopped", "by"]
    assert "restarts" in lines[0]
    column = lines[0].index("restarts")
    assert [line[column:].split()[0] for line in lines[1:]] == ["1", "2"]
    with open(tmp_path / "results.csv") as f:
        assert [(r["trial"], r["stopped_by"], r["restarts"]) for r in csv.DictReader(f)] == [
            ("trial-000", "finished", "1"), ("trial-001", "failed", "2")]
    again = Results.read(tmp_path)
    assert again.rows["trial-001"].restarts == 2 and again.rows["trial-001"].error == "trainer killed 2 times"


def test_a_table_from_before_the_restarts_column_reads_back_with_none(tmp_path):
    old = {"trial": "trial-000", "settings": {}, "best_val": 0.8, "test_score": None, "steps": 4,
           "stopped_by": "ASHA", "run_dir": "/s/trials/trial-000", "pool": {}, "error": ""}
    (tmp_path / RESULTS_JSON).write_text(json.dumps({"trials": [old]}))
    read = Results.read(tmp_path).rows["trial-000"]
    assert read.restarts == 0 and read.done and math.isnan(read.test_score)


def test_the_best_trial_is_one_that_did_not_fail_unless_none_validated_but_failed_ones(tmp_path):
    from pathlib import Path

    from saintpipe.sweep.driver import SweepSummary

    results = Results(tmp_path)
    results.add(row("trial-000", 0.7, "ASHA", 0))
    results.add(row("trial-001", 0.9, "failed", 2))  # best validation before its trainer died past its budget
    best = SweepSummary(Path(tmp_path), results).best()
    assert best is not None and best.trial == "trial-000"
    (tmp_path / "other").mkdir()
    only_failed = Results(tmp_path / "other")
    only_failed.add(row("trial-001", 0.9, "failed", 2))
    best = SweepSummary(Path(tmp_path), only_failed).best()
    assert best is not None and best.trial == "trial-001"
