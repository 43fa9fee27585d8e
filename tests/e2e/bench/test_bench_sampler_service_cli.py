"""``saintpipe bench sampler-service`` runs end to end and prints consistent figures (tiny graph, short windows)."""

from __future__ import annotations

import json

# Six service configurations, each with three plain-loop windows of this length around two service windows
# (each after the benchmark's own 0.3 s to settle): 8.1 s of windows in all, 12.6 s with 0.3 s windows. A
# window on this tiny graph still holds many subgraphs.
WINDOW_S = 0.15


def test_bench_sampler_service_prints_its_figures_as_json(cli, tmp_path):
    from saintpipe.core.netns import netns_unavailable
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import write_dataset

    data = tmp_path / "demo"
    write_dataset(data, **generate_demo(num_nodes=2000, feature_dim=4, seed=1))
    result = cli("bench", "sampler-service", "--data", str(data), "--param", "roots=50",
                 "--seconds", str(WINDOW_S), "--windows", "2", "--workers", "2", "--norm-subgraphs", "4",
                 "--cross-host", "veth", "--json", timeout=300)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["benchmark"] == "samplers"  # the report's name, as before the command was renamed
    assert report["params"]["transport"] == "shared_memory"  # auto, with the benchmark's loopback Redis
    assert report["params"]["wire"] == "full"  # auto, the bytes going to shared memory
    assert report["params"]["windows"] == 2
    assert report["params"]["expanded_equal"] is True  # node sets expand into the very subgraphs
    runs = [(row["run"], row["workers"]) for row in report["rows"]]
    expected = [("plain loop, around service (shared_memory) x1", 1), ("service (shared_memory)", 1),
                ("plain loop, around service (redis) x1", 1), ("service (redis)", 1),
                ("plain loop, around service (redis, node sets) x1", 1), ("service (redis, node sets)", 1),
                ("plain loop, around service (shared_memory) x2", 1), ("service (shared_memory)", 2)]
    reason = netns_unavailable()
    if reason is None:
        assert report["params"]["cross_host"] == "veth"
        expected += [("plain loop, around service (redis via veth) x1", 1), ("service (redis via veth)", 1),
                     ("plain loop, around service (redis, node sets via veth) x1", 1),
                     ("service (redis, node sets via veth)", 1)]
    else:  # skipped, saying why
        assert report["params"]["cross_host"] == f"skipped: {reason}"
        assert reason in result.stderr
    assert runs == expected
    for row in report["rows"]:
        assert row["subgraphs"] > 0 and row["subgraphs_per_s"] > 0 and row["cpu_ms"] > 0
        assert 0 < row["kernel_cpu_ms"] <= row["cpu_ms"] * 1.001  # the kernel is part of the worker's CPU
        # Windows of --seconds each: three plain windows around two service windows.
        assert row["seconds"] >= (3 if row["run"].startswith("plain") else 2) * WINDOW_S * 0.99
    summary = report["summary"]
    rows = report["rows"]
    one, two = rows[1], rows[7]
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
    # Whole subgraphs and node sets through Redis, each against its own plain loops, loopback and veth.
    prefixes = [""] + (["veth: "] if reason is None else [])
    for prefix in prefixes:
        for what in ("the bytes in Redis", "node sets in Redis (wire nodes)"):
            name = f"{prefix}service(1) with {what}"
            low, high = summary[f"{name} / plain loop, subgraphs/s, lowest and highest window"]
            assert 0 < low <= summary[f"{name} / plain loop, subgraphs/s (median)"] <= high
            assert 0 < summary[f"{name}: kernel CPU / worker CPU"] <= 1.001
    assert not any(key.startswith("veth: ") for key in summary) or reason is None
    nodes_row = rows[5]
    assert abs(summary["service(1) with node sets in Redis (wire nodes): kernel CPU / worker CPU"]
               - nodes_row["kernel_cpu_ms"] / nodes_row["cpu_ms"]) < 1e-9
    # Bytes before and after, measured on the same subgraphs, and where the work went.
    assert 0 < summary["bytes per subgraph, node set (wire nodes)"] < summary["bytes per subgraph, whole (wire full)"]
    assert abs(summary["node set / whole, bytes"] - summary["bytes per subgraph, node set (wire nodes)"]
               / summary["bytes per subgraph, whole (wire full)"]) < 1e-12
    assert summary["trainer: decode and expand a node set, ms per subgraph (median round)"] > 0
    assert summary["trainer: decode a whole subgraph, ms per subgraph (median round)"] > 0
    assert (data / "norm").is_dir()  # the normalization was stored with the dataset, and reused
