"""``saintpipe bench accuracy`` through the console script: the three trainings, errors in one line,
and nothing left behind (the experiment's private Redis and its shared-memory slots)."""

from __future__ import annotations

import json
from pathlib import Path


def _slots() -> set[str]:
    """Shared-memory slots of in-process pools (their job ids start with "inprocess-")."""
    shm = Path("/dev/shm")
    return {p.name for p in shm.glob("saintpipe-pool-*-inprocess-*")} if shm.is_dir() else set()


def test_bench_accuracy_runs_all_three_trainings(cli):
    before = _slots()
    proc = cli(
        "bench",
        "accuracy",
        "--datasets",
        "cora",
        "--seeds",
        "1",
        "--epochs",
        "3",
        "--roots",
        "100",
        "--norm-subgraphs",
        "20",
        "--hidden",
        "16,16",
        "--json",
    )
    report = json.loads(proc.stdout)
    assert _slots() <= before, "the experiment's shared-memory slots must go with it"
    trainings = {r["training"] for r in report["rows"]}
    assert trainings == {"full-batch", "rw+norm", "rw (no norm)"}
    assert all(0.0 <= r["test_mean"] <= 1.0 and r["seeds"] == 1 for r in report["rows"])
    assert "cora_rw_norm_minus_full_points" in report["summary"]


def test_bench_accuracy_names_a_missing_dataset(cli):
    proc = cli("bench", "accuracy", "--datasets", "nope", check=False)
    assert proc.returncode == 2 and "nope.npz not found" in proc.stderr
