"""``saintpipe bench startup`` runs the pipeline as a user would and reports its start-up and its step."""

from __future__ import annotations

import json
import math

from tests.support.pipeline import small_dataset


def test_bench_startup_warm_reports_the_first_step_and_the_step_beside_the_bare_model(cli, tmp_path):
    data = small_dataset(tmp_path / "small")
    proc = cli("bench", "startup", "--data", str(data), "--modes", "warm", "--seconds", "25", "--repeats", "5",
               "--json", timeout=300)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["benchmark"] == "startup"
    (row,) = report["rows"]
    assert row["mode"] == "warm"
    assert row["steps"] > 0 and row["first_step_s"] > 0  # a figure, not a verdict: no time is asserted
    for part in ("dataset", "redis", "feature shards", "ray", "sampler workers", "trainer", "first subgraph"):
        assert part in row["timeline"], row["timeline"]
    assert 0 <= row["data_wait_pct"] <= 100
    assert row["compute_per_step_ms"] > 0 and row["bare_step_ms"] > 0
    assert math.isclose(row["compute_vs_bare"], row["compute_per_step_ms"] / row["bare_step_ms"])
    assert row["subgraph_nodes"] > 0
