"""``saintpipe bench pool`` runs end to end and prints its figures as one JSON object."""

from __future__ import annotations

import json


def test_bench_pool_prints_figures_and_the_ratio(cli, redis_server):
    proc = cli(
        "bench",
        "pool",
        "--nodes",
        "300",
        "--edges",
        "2000",
        "--count",
        "6",
        "--batch",
        "2",
        "--json",
        "--redis-url",
        redis_server.url,
        timeout=120,
    )
    report = json.loads(proc.stdout)
    assert report["benchmark"] == "pool"
    assert report["params"]["nodes"] == 300 and report["params"]["redis"] == "external"
    paths = [row["path"] for row in report["rows"]]
    assert paths[0].startswith("pool put+get+ack") and paths[1].startswith("redis SET+GET")
    assert all(row["subgraphs_per_s"] > 0 and row["MB_per_s"] > 0 for row in report["rows"])
    ratio = report["summary"]["ratio_pool_to_baseline"]
    assert ratio == report["rows"][0]["subgraphs_per_s"] / report["rows"][1]["subgraphs_per_s"]
    assert report["summary"]["meets_target"] == (ratio >= 0.7)
    # Decoding alone by the three readers of the same bytes, and their ratios.
    speed = {row["path"]: row["subgraphs_per_s"] for row in report["rows"] if row["path"].startswith("decode:")}
    compiled, walked, generated = (
        speed["decode: hand reader, compiled walk+hash+checks"],
        speed["decode: hand reader, Python walk (protowire)"],
        speed["decode: generated class (FromString)"],
    )
    assert report["summary"]["ratio_decode_hand_to_generated"] == compiled / generated
    assert report["summary"]["ratio_decode_python_walk_to_generated"] == walked / generated
    assert report["summary"]["ratio_decode_compiled_to_python_walk"] == compiled / walked
    # Rounds of 2 cycles of each path, after a discarded warm-up round; spread and paired ratios beside.
    assert (report["params"]["count"], report["params"]["rounds"], report["params"]["batch"]) == (6, 3, 2)
    assert report["params"]["malloc"] in ("fixed", "default (not glibc)")
    for row in report["rows"]:
        assert row["min_ms"] <= row["median_ms"] <= row["max_ms"] and row["iqr_pct"] >= 0
    for key in ("ratio_pool_to_baseline", "ratio_pool_to_io_floor", "ratio_decode_hand_to_generated"):
        low, high = report["summary"][f"{key}_paired_range"]
        assert 0 < low <= report["summary"][f"{key}_paired"] <= high
    assert not redis_server.client().keys("saintpipe:*")  # the benchmark cleaned up after itself


def test_bench_pool_rejects_bad_arguments_in_one_line(cli):
    proc = cli("bench", "pool", "--count", "0", check=False)
    assert proc.returncode != 0
    assert "argument --count: must be an integer from 1 to" in proc.stderr and "Traceback" not in proc.stderr


def test_bench_pool_leaves_malloc_alone_when_asked(cli, redis_server):
    proc = cli("bench", "pool", "--nodes", "50", "--edges", "200", "--count", "2", "--default-malloc", "--json",
               "--redis-url", redis_server.url, timeout=120)
    report = json.loads(proc.stdout)
    assert report["params"]["malloc"] == "default"
    assert (report["params"]["rounds"], report["params"]["batch"]) == (2, 1)  # COUNT/20 rounds to 1 cycle
