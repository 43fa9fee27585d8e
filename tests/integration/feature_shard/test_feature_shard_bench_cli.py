"""`saintpipe bench features` runs end to end (tiny sizes) and reports every figure."""

from __future__ import annotations

import json


def test_bench_features_json(cli):
    args = ("--dims", "8", "--rows", "64", "--nodes", "600", "--repeats", "2", "--json")
    proc = cli("bench", "features", *args)
    report = json.loads(proc.stdout)
    assert report["benchmark"] == "features" and report["params"]["servers"] == "subprocesses"
    paths = [(row["dim"], row["path"]) for row in report["rows"]]
    names = ("numpy mmap (baseline)", "service bytes", "service shm", "service fp16")
    decoders = ("decode chunk: hand reader", "decode chunk: generated class")
    assert paths == [(d, p) for d in (8,) for p in names + decoders]
    gathers, decodes = report["rows"][:4], report["rows"][4:]
    for row in gathers:
        assert row["rows_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0 and row["cpu_ms"] > 0
        assert row["wait_ms"] >= 0
    for row in decodes:  # one shard's answer of a gather: 32 float32 rows of 8, as the server frames it
        assert row["rows_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0 and row["wire_MB"] > 32 * 8 * 4 / 1e6
    fp32, shm, fp16 = gathers[1:]
    assert fp16["wire_MB"] * 2 == fp32["wire_MB"] == shm["shm_MB"] == 64 * 8 * 4 / 1e6
    assert shm["wire_MB"] == 0 and fp32["shm_MB"] == 0  # rows crossed the socket or shared memory, not both
    summary = report["summary"]
    assert summary["target_path"] == "service shm" and "target_met" not in summary
    assert summary["ratio_dim8"] == summary["ratio_dim8_shm"] == shm["ratio"]
    assert summary["ratio_dim8_bytes"] == fp32["ratio"] and summary["ratio_dim8_fp16"] == fp16["ratio"]
    hand, generated = decodes
    assert summary["ratio_decode_dim8_hand_to_generated"] == generated["p50_ms"] / hand["p50_ms"]
