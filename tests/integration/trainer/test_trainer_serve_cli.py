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


def _ranks(cli, world: int, master: str, common: list[str]) -> list[dict]:
    """``world`` console-script processes, one rank each, started together; their JSON summaries by rank."""
    from concurrent.futures import ThreadPoolExecutor

    def one(rank: int):
        return cli("serve", "trainer", *common, "--world-size", str(world), "--rank", str(rank),
                   "--master", master, "--json", timeout=240)

    with ThreadPoolExecutor(world) as ex:
        procs = list(ex.map(one, range(world)))
    return [json.loads(p.stdout.strip().splitlines()[-1]) for p in procs]


def test_serve_trainer_ranks_train_data_parallel_and_resume_together(
    cli, cora_dir, feature_addresses, producer, redis_server_session, tmp_path
):
    """The Kubernetes trainer Job's code path: one process per rank, no Ray, a shared checkpoint directory."""
    from tests.support.cli import free_port

    job = "trainer-cli-ranks"
    ckpt = tmp_path / "ckpt"
    common = ["--redis-url", redis_server_session.url, "--features", feature_addresses, "--data",
              str(cora_dir), "--job", job, "--checkpoint-dir", str(ckpt)]
    with producer(job) as (pool, _):
        first = _ranks(cli, 2, f"127.0.0.1:{free_port()}", [*common, "--max-steps", "4"])
        second = _ranks(cli, 2, f"127.0.0.1:{free_port()}", [*common, "--max-steps", "6"])
        acknowledged = pool.stats().acknowledged
    assert [s["rank"] for s in first] == [0, 1] and all(s["world_size"] == 2 for s in first)
    # Each rank trained on its own subgraphs, yet both hold the same weights: the gradients were averaged.
    assert all(s["steps"] == 4 and s["subgraphs"] == 4 for s in first)
    assert first[0]["model_digest"] == first[1]["model_digest"]
    # A restarted group resumes from rank 0's checkpoint in the shared directory, on every rank.
    assert all(s["resumed_from_step"] == 4 and s["steps"] == 6 for s in second)
    assert second[0]["model_digest"] == second[1]["model_digest"] != first[0]["model_digest"]
    assert acknowledged >= 2 * 6
    assert (ckpt / "latest.pt").is_file()


def test_serve_trainer_rank_flags_are_checked_before_anything_starts(cli, cora_dir, tmp_path):
    common = ["serve", "trainer", "--redis-url", "redis://127.0.0.1:1/0", "--features", "127.0.0.1:1",
              "--data", str(cora_dir), "--job", "x"]
    cases = {
        ("--world-size", "2", "--rank", "2", "--master", "127.0.0.1:2"): "--rank must be in 0..1",
        ("--world-size", "2", "--rank", "0"): "needs --master",
        ("--rank", "0"): "both --world-size and --rank",
        ("--world-size", "2", "--rank", "1", "--master", "trainer-0"): "expected HOST:PORT",
        ("--world-size", "1", "--rank", "0", "--trainers", "2"): "drop --trainers",
    }
    for flags, message in cases.items():
        proc = cli(*common, *flags, check=False, timeout=60)
        assert proc.returncode != 0 and message in proc.stderr, (flags, proc.stderr)
        assert "Traceback" not in proc.stderr
