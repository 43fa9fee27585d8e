"""``saintpipe bench startup``: a run's --json summary read into the benchmark's figures."""

from __future__ import annotations

import math

from saintpipe.bench.startup import row_of


def summary(**overrides):
    base = {"steps": 100, "training_seconds": 4.0, "subgraph_nodes": 2774.0, "subgraph_edges": 6547.0,
            "times": {"compute": 2.0, "data_wait": 0.5},
            "startup": {"ray": 3.4, "dataset": 0.5, "first step": 7.9, "trainer": 7.6}}
    base.update(overrides)
    return base


def test_a_row_holds_the_first_step_the_wait_share_the_rate_and_the_compute_per_step():
    row = row_of("warm", summary(), wall_s=12.0)
    assert row["first_step_s"] == 7.9
    assert row["data_wait_pct"] == 20.0  # 0.5 of 2.5 s
    assert row["steps_per_s"] == 25.0
    assert row["compute_per_step_ms"] == 20.0
    assert row["timeline"] == "dataset 0.5, ray 3.4, trainer 7.6, first step 7.9"


def test_a_run_that_never_stepped_reports_no_first_step_and_no_share():
    row = row_of("cold", summary(steps=0, training_seconds=0.0, times={"compute": 0.0, "data_wait": 0.0},
                                 startup={"dataset": 0.5}), wall_s=30.0)
    assert math.isnan(row["first_step_s"]) and math.isnan(row["data_wait_pct"])
    assert row["steps_per_s"] == 0.0
