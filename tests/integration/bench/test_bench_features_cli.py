"""`saintpipe bench features` runs end to end (tiny sizes) and reports every figure."""

from __future__ import annotations

import json

import pytest

from saintpipe.core.netns import netns_unavailable

# A benchmark: the cores to itself (tests/conftest.py).
pytestmark = pytest.mark.serial

NAMES = ("numpy mmap (baseline)", "service bytes", "service grpc", "service shm", "service fp16")
DECODERS = ("decode chunk: hand reader", "decode chunk: generated class")
ARGS = ("--dims", "8", "--rows", "64", "--nodes", "600", "--repeats", "2", "--json")


def test_bench_features_json(cli):
    report = json.loads(cli("bench", "features", *ARGS).stdout)
    assert report["benchmark"] == "features" and report["params"]["servers"] == "subprocesses"
    assert report["params"]["warmup_rounds"] == 3 and report["params"]["cross_host"] == "none"
    paths = [(row["dim"], row["path"]) for row in report["rows"]]
    assert paths == [(d, p) for d in (8,) for p in NAMES + DECODERS]
    gathers, decodes = report["rows"][:5], report["rows"][5:]
    for row in gathers:
        assert row["rows_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0 and row["cpu_ms"] > 0
        assert row["wait_ms"] >= 0 and row["iqr_pct"] >= 0
        assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]  # the median of the per-round ratios
    for row in decodes:  # one shard's answer of a gather: 32 float32 rows of 8, as the server frames it
        assert row["rows_per_s"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0 and row["wire_MB"] > 32 * 8 * 4 / 1e6
    bulk, grpc, shm, fp16 = gathers[1:]
    assert fp16["wire_MB"] * 2 == bulk["wire_MB"] == grpc["wire_MB"] == shm["shm_MB"] == 64 * 8 * 4 / 1e6
    assert shm["wire_MB"] == 0 and bulk["shm_MB"] == 0  # rows crossed the socket or shared memory, not both
    summary = report["summary"]
    assert summary["target_path"] == "service shm" and "target_met" not in summary
    assert summary["ratio_dim8"] == summary["ratio_dim8_shm"] == shm["ratio"]
    assert summary["ratio_dim8_bytes"] == bulk["ratio"] and summary["ratio_dim8_fp16"] == fp16["ratio"]
    assert summary["ratio_dim8_grpc"] == grpc["ratio"]
    assert summary["ratio_dim8_bytes_range"] == [bulk["ratio_min"], bulk["ratio_max"]]
    hand, generated = decodes
    assert summary["ratio_decode_dim8_hand_to_generated"] == generated["p50_ms"] / hand["p50_ms"]


@pytest.mark.skipif(netns_unavailable() is not None, reason=f"no network namespaces here: {netns_unavailable()}")
def test_bench_features_cross_host_veth_reports_both_links(cli):
    report = json.loads(cli("bench", "features", *ARGS, "--no-fp16", "--cross-host", "veth").stdout)
    assert report["params"]["cross_host"] == "veth"
    paths = [row["path"] for row in report["rows"]]
    assert paths[:6] == ["numpy mmap (baseline)", "service bytes", "service grpc", "service shm",
                         "veth service bytes", "veth service grpc"]
    veth = {row["path"]: row for row in report["rows"]}["veth service bytes"]
    assert veth["wire_MB"] == 64 * 8 * 4 / 1e6 and veth["shm_MB"] == 0
    assert report["summary"]["ratio_dim8_veth_bytes"] == veth["ratio"]
