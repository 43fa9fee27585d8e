"""``saintpipe bench kernels`` (old name: ``bench sampler``) runs end to end and prints consistent figures."""

from __future__ import annotations

import json

import pytest


def test_bench_kernels_quick_json(cli, saintpipe_home):
    proc = cli("bench", "kernels", "--quick", "--scales", "9", "--seconds", "0.1", "--processes", "2",
               "--json")
    report = json.loads(proc.stdout)
    # "sampler": the report's name, as before the command was renamed
    assert report["benchmark"] == "sampler" and report["params"]["processes"] == 2
    assert report["params"]["rounds"] == 2 and report["params"]["warmup"] == 1  # --quick's rounds
    rows = report["rows"]
    for graph in ("kronecker-s9", "cora"):
        mine = {(r["sampler"], r["cores"]): r for r in rows if r["graph"] == graph}
        for kind in ("frontier", "random_walk", "edge", "node"):
            one, two = mine[(kind, 1)], mine[(kind, 2)]
            for row in (one, two):
                assert row["subgraphs_per_s"] > 0 and row["mean_nodes"] > 0 and row["mean_edges"] > 0
                nodes_per_subgraph = row["nodes_per_s"] / row["subgraphs_per_s"]
                assert abs(nodes_per_subgraph - row["mean_nodes"]) < 0.05 * row["mean_nodes"]
            assert abs(two["scaling"] - two["subgraphs_per_s"] / one["subgraphs_per_s"]) < 1e-9
            assert one["iqr_pct"] >= 0 and two["iqr_pct"] >= 0 and two["scaling_paired"] > 0
        assert ("baseline: numpy random walk", 1) in mine and ("baseline: direct Algorithm 2", 1) in mine
        summary = report["summary"]
        assert summary[f"{graph} random_walk / numpy baseline (1 core)"] > 0
        assert summary[f"{graph} frontier dashboard / direct Algorithm 2 (1 core)"] > 0
        # Paired: the median of per-round ratios, within the range of those ratios.
        for key in (f"{graph} random_walk / numpy baseline (1 core)",
                    f"{graph} frontier dashboard / direct Algorithm 2 (1 core)"):
            low, high = summary[f"{key}, paired, range"]
            assert 0 < low <= summary[f"{key}, paired"] <= high
        assert summary[f"{graph} node: scaling / cores, paired"] == mine[("node", 2)]["scaling_paired"] / 2
    # The Kronecker graph was cached as a dataset under SAINTPIPE_HOME.
    assert (saintpipe_home / "datasets" / "kronecker-s9-d16-seed0" / "manifest.json").is_file()


def test_bench_kernels_growth_across_scales(cli, saintpipe_home):
    """Two scales: a growth phase measures every sampler on both in the same rounds."""
    proc = cli("bench", "kernels", "--quick", "--scales", "8,10", "--no-cora", "--seconds", "0.05",
               "--processes", "1", "--samplers", "frontier,node", "--json")
    report = json.loads(proc.stdout)
    growth = {(r["sampler"], r["graph"]): r for r in report["rows"] if r["sampler"].endswith("(growth phase)")}
    assert set(growth) == {(f"{k} (growth phase)", f"kronecker-s{s}") for k in ("frontier", "node") for s in (8, 10)}
    summary = report["summary"]
    for kind in ("frontier", "node"):
        key = f"{kind} growth s8->s10"
        small, large = growth[(f"{kind} (growth phase)", "kronecker-s8")], growth[(f"{kind} (growth phase)",
                                                                                  "kronecker-s10")]
        assert large["ms_per_subgraph"] == 1000.0 / large["subgraphs_per_s"] > 0
        low, high = summary[f"{key}, paired, range"]
        assert 0 < low <= summary[key] == summary[f"{key}, paired"] <= high
        assert small["mean_nodes"] > 0 and large["mean_nodes"] > 0
        # the split: work (entries scanned, larger on the larger graph) times the time per entry
        for row in (small, large):
            assert row["ns_per_scanned_entry"] == pytest.approx(1e6 * row["ms_per_subgraph"]
                                                                / row["scanned_per_subgraph"])
        work = summary[f"{kind} scanned entries growth s8->s10"]
        assert work == pytest.approx(large["scanned_per_subgraph"] / small["scanned_per_subgraph"]) and work > 1
        assert summary[f"{kind} growth per scanned entry s8->s10"] == pytest.approx(summary[key] / work)


def test_bench_kernels_rejects_bad_flags_also_under_its_old_name(cli, saintpipe_home):
    proc = cli("bench", "kernels", "--scales", "x", check=False)
    assert proc.returncode == 2 and "--scales" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("bench", "sampler", "--samplers", "snowball", check=False)
    assert proc.returncode == 2 and "snowball" in proc.stderr
