"""``saintpipe serve trainer`` end to end: the console script joins the test's Ray; real Redis and shards."""

from __future__ import annotations

import json


def test_serve_trainer_trains_and_prints_the_summary(
    cli, ray_local, cora_dir, feature_addresses, producer, redis_server_session, tmp_path
):
    job = "trainer-cli"
    ray_address = ray_local.get_runtime_context().gcs_address
    with producer(job) as (pool, _):
        proc = cli(
            "serve",
            "trainer",
            "--redis-url",
            redis_server_session.url,
            "--features",
            feature_addresses,
            "--data",
            str(cora_dir),
            "--job",
            job,
            "--max-steps",
            "3",
            "--checkpoint-dir",
            str(tmp_path / "ckpt"),
            "--ray-address",
            ray_address,
            "--json",
            timeout=240,
        )
        acknowledged = pool.stats().acknowledged
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 3 and summary["subgraphs"] == 3
    assert 0.0 <= summary["test_score"] <= 1.0
    assert {"sampling_wait_s", "feature_fetch_s", "data_wait_s", "compute_s", "total_s"} <= set(summary)
    assert acknowledged >= 3
    assert (tmp_path / "ckpt" / "latest.pt").is_file()
