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
    assert report["params"]["transport"] == "shared_memory"  # auto, with the benchmark's loopback Redis
    runs = [(row["run"], row["workers"]) for row in report["rows"]]
    assert runs == [("plain loop (kernel only)", 1), ("service (shared_memory)", 1), ("plain loop", 1),
                    ("service (redis)", 1), ("plain loop", 1), ("service (shared_memory)", 2), ("plain loop", 1)]
    for row in report["rows"]:
        assert row["subgraphs"] > 0 and row["subgraphs_per_s"] > 0 and row["cpu_ms"] > 0
        assert 0 < row["kernel_cpu_ms"] <= row["cpu_ms"] * 1.001  # the kernel is part of the worker's CPU
        assert row["pool_wait_s"] == 0  # the pool is sized so that nobody waits during the window
    summary = report["summary"]
    rows = report["rows"]
    one, two = rows[1], rows[5]
    assert abs(summary["scaling service(2) / service(1), subgraphs/s"]
               - two["subgraphs_per_s"] / one["subgraphs_per_s"]) < 1e-9
    # Each service run is held against the mean of the plain loops on either side of it.
    assert abs(summary["service(1) / plain loop, subgraphs/s"]
               - one["subgraphs_per_s"] / ((rows[0]["subgraphs_per_s"] + rows[2]["subgraphs_per_s"]) / 2)) < 1e-9
    assert abs(summary["service(1): kernel CPU / worker CPU, same window"]
               - one["kernel_cpu_ms"] / one["cpu_ms"]) < 1e-9
    assert summary["one Redis thread's ceiling, subgraphs/s"] > 0
    assert (data / "norm").is_dir()  # the normalization was stored with the dataset, and reused
