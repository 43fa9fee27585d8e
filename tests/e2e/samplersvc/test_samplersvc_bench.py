"""``saintpipe bench samplers`` runs end to end and prints consistent figures (tiny graph, short windows)."""

from __future__ import annotations

import json


def test_bench_samplers_prints_its_figures_as_json(cli, tmp_path):
    from services.dataset.demo import generate_demo
    from services.dataset.store import write_dataset

    data = tmp_path / "demo"
    write_dataset(data, **generate_demo(num_nodes=2000, feature_dim=4, seed=1))
    result = cli("bench", "samplers", "--data", str(data), "--param", "roots=50", "--seconds", "0.5",
                 "--workers", "2", "--norm-subgraphs", "4", "--json", timeout=240)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["benchmark"] == "samplers"
    runs = [(row["run"], row["workers"]) for row in report["rows"]]
    assert runs == [("plain loop (kernel only)", 1), ("service", 1), ("plain loop (again)", 1), ("service", 2)]
    for row in report["rows"]:
        assert row["subgraphs"] > 0 and row["subgraphs_per_s"] > 0 and row["cpu_ms"] > 0
        assert row["pool_wait_s"] == 0  # the pool is sized so that nobody waits during the window
    summary = report["summary"]
    one, two = report["rows"][1], report["rows"][3]
    assert abs(summary["scaling service(2) / service(1), subgraphs/s"]
               - two["subgraphs_per_s"] / one["subgraphs_per_s"]) < 1e-9
    assert summary["one Redis thread's ceiling, subgraphs/s"] > 0
    assert (data / "norm").is_dir()  # the normalization was stored with the dataset, and reused
