"""`saintpipe bench features` runs end to end (tiny sizes) and reports every figure."""

from __future__ import annotations

import json


def test_bench_features_json(cli):
    args = ("--dims", "8", "--rows", "64", "--nodes", "600", "--repeats", "2", "--json")
    proc = cli("bench", "features", *args)
    report = json.loads(proc.stdout)
    assert report["benchmark"] == "features" and report["params"]["servers"] == "subprocesses"
    paths = [(row["dim"], row["path"]) for row in report["rows"]]
    assert paths == [(d, p) for d in (8,) for p in ("numpy mmap (baseline)", "service", "service fp16")]
    for row in report["rows"]:
        assert row["rows_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0 and row["cpu_ms"] > 0
        assert row["wait_ms"] >= 0
    fp32, fp16 = report["rows"][1], report["rows"][2]
    assert fp16["wire_MB"] * 2 == fp32["wire_MB"] == 64 * 8 * 4 / 1e6
    assert report["summary"]["ratio_dim8"] == fp32["ratio"] and "target_met" not in report["summary"]
