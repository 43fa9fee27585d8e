"""``saintpipe serve trainer`` through the console script: its errors, in one line."""

from __future__ import annotations


def test_serve_trainer_names_missing_flags(cli, tmp_path):
    proc = cli("serve", "trainer", "--data", str(tmp_path), check=False, env={"SAINTPIPE_REDIS_URL": ""})
    assert proc.returncode == 2
    assert proc.stderr.strip() == "saintpipe: error: serve trainer needs --redis-url, --features, --job"
    proc = cli(
        "serve",
        "trainer",
        "--data",
        str(tmp_path),
        "--redis-url",
        "redis://127.0.0.1:1/0",
        "--features",
        "127.0.0.1:1",
        "--job",
        "j",
        check=False,
    )
    assert proc.returncode == 2 and "not a dataset directory (no manifest.json)" in proc.stderr
