"""``saintpipe bench samplers`` runs end to end and prints consistent figures (tiny graph, short windows)."""

from __future__ import annotations

import json


def test_bench_samplers_prints_its_figures_as_json(cli, tmp_path):
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import write_dataset

    data = tmp_path / "demo"
    write_dataset(data, **generate_demo(num_nodes=2000, feature_dim=4, seed=1))
    result = cli("bench", "samplers", "--data", str(data), "--param", "roots=50", "--seconds", "0.3",
                 "--windows", "2", "--workers", "2", "--norm-subgraphs", "4", "--json", timeout=240)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["benchmark"] == "samplers"
    assert report["params"]["transport"] == "shared_memory"  # auto, with the benchmark's loopback Redis
    assert report["params"]["windows"] == 2
    runs = [(row["run"], row["workers"]) for row in report["rows"]]
    assert runs == [("plain loop, around service (shared_memory) x1", 1), ("service (shared_memory)", 1),
                    ("plain loop, around service (redis) x1", 1), ("service (redis)", 1),
                    ("plain loop, around service (shared_memory) x2", 1), ("service (shared_memory)", 2)]
    for row in report["rows"]:
        assert row["subgraphs"] > 0 and row["subgraphs_per_s"] > 0 and row["cpu_ms"] > 0
        assert 0 < row["kernel_cpu_ms"] <= row["cpu_ms"] * 1.001  # the kernel is part of the worker's CPU
        # Windows of --seconds each: three plain windows around two service windows.
        assert row["seconds"] >= (3 if row["run"].startswith("plain") else 2) * 0.3 * 0.99
    summary = report["summary"]
    rows = report["rows"]
    one, two = rows[1], rows[5]
    assert abs(summary["scaling service(2) / service(1), subgraphs/s"]
               - two["subgraphs_per_s"] / one["subgraphs_per_s"]) < 1e-9
    # Each service window is held against the plain windows on either side of it; the median lies between
    # the lowest and the highest window.
    median = summary["service(1) / plain loop, subgraphs/s (median of 2 windows)"]
    assert 0 < summary["service(1) / plain loop, subgraphs/s, lowest window"] <= median
    assert median <= summary["service(1) / plain loop, subgraphs/s, highest window"]
    assert abs(summary["service(1): kernel CPU / worker CPU, same windows"]
               - one["kernel_cpu_ms"] / one["cpu_ms"]) < 1e-9
    assert summary["one Redis thread's ceiling, subgraphs/s"] > 0
    assert (data / "norm").is_dir()  # the normalization was stored with the dataset, and reused
