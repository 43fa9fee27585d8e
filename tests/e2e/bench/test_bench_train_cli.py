"""The trainer's benchmarks through the console script: bench train and bench inference.

(``bench accuracy``: test_bench_accuracy_cli.py, beside this file; ``serve trainer``:
tests/e2e/trainer/test_trainer_serve_cli.py.)
"""

from __future__ import annotations

import json

import pytest


def test_bench_train_prints_times_and_macs_of_all_three_orders(cli):
    proc = cli(
        "bench",
        "train",
        "--nodes",
        "600",
        "--degree",
        "6",
        "--classes",
        "5",
        "--sage-features",
        "12",
        "--sage-hidden",
        "64",
        "--gcn-features",
        "80",
        "--gcn-hidden",
        "8",
        "--repeats",
        "3",
        "--json",
    )
    report = json.loads(proc.stdout)
    assert report["benchmark"] == "train" and report["params"]["nodes"] == 600
    rows = {(r["model"].split()[0], r["order"]): r for r in report["rows"]}
    assert set(rows) == {(m, o) for m in ("sage", "gcn") for o in ("auto", "ax_first", "xw_first")}
    for model in ("sage", "gcn"):
        assert rows[(model, "auto")]["macs_vs_auto"] == 1.0
        for order in ("ax_first", "xw_first"):  # the schedule never executes more MACs than a fixed order
            assert rows[(model, order)]["macs_vs_auto"] >= 1.0
            assert rows[(model, order)]["ms_per_iter"] > 0
    assert rows[("gcn", "ax_first")]["macs_vs_auto"] > 1.1  # 80 -> 8: (A X) W wastes the wide side
    # Interleaved rounds: the spread beside each median, and paired (per-round) ratios beside the old ones.
    assert report["params"]["repeats"] == 3 and report["params"]["warmup"] == 1
    for (model, order), row in rows.items():
        assert row["ms_min"] <= row["ms_per_iter"] <= row["ms_max"] and row["iqr_pct"] >= 0
        assert row["paired_min"] <= row["time_vs_auto_paired"] <= row["paired_max"]
        assert row["time_vs_auto"] == pytest.approx(row["ms_per_iter"] / rows[(model, "auto")]["ms_per_iter"])
        if order != "auto":
            key = f"{model}_{order}_over_auto"
            assert report["summary"][key] == row["time_vs_auto"]
            assert report["summary"][f"{key}_paired"] == row["time_vs_auto_paired"]
            assert report["summary"][f"{key}_paired_range"] == [row["paired_min"], row["paired_max"]]
    assert "L1[80->8]: Y=A(XW)" in report["summary"]["gcn_plan"]
    assert "L1[12->32]: Y=(AX)W" in report["summary"]["sage_plan"]


def test_bench_train_rejects_bad_sizes_in_one_line(cli):
    proc = cli("bench", "train", "--sage-hidden", "31", check=False)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "saintpipe: error: --sage-hidden must be even (self and neighbour halves), got 31"
    )


def test_bench_inference_compares_layerwise_with_one_product_per_layer(cli):
    proc = cli("bench", "inference", "--scale", "9", "--features", "16", "--hidden", "32", "--repeats", "1",
               "--block-rows", "128", "--json")
    report = json.loads(proc.stdout)
    modes = {row["mode"]: row for row in report["rows"]}
    base = modes["baseline: one sparse-dense product per layer"]
    assert base["max_abs_diff"] is None and base["median_s"] >= 0
    for name in ("layer-wise, outputs in memory", "layer-wise, outputs in files"):
        assert modes[name]["max_abs_diff"] < 1e-4  # equal to the one-pass logits
    summary = report["summary"]
    assert summary["blocks per pass"] > 1
    assert summary["layer-wise (in memory) / one spmm per layer"] > 0
    assert summary["layer-wise (in files) / one spmm per layer"] > 0


def test_bench_inference_without_the_one_pass_still_gives_the_ratios(cli):
    # Scale 24's one pass needs 28 GB (50 features, width 64): the bench must run without it.
    proc = cli("bench", "inference", "--scale", "8", "--features", "8", "--hidden", "16", "--repeats", "1",
               "--block-rows", "64", "--no-one-pass", "--json")
    report = json.loads(proc.stdout)
    modes = {row["mode"]: row for row in report["rows"]}
    assert "one pass" not in modes and modes["layer-wise, outputs in memory"]["max_abs_diff"] is None
    assert report["summary"]["layer-wise (in memory) / one spmm per layer"] > 0
    assert report["summary"]["input rows per output row, 2 hops (k-hop form)"] >= \
        report["summary"]["input rows read per output row, 1 hop (layer-wise)"] > 1
