"""``saintpipe sweep`` when trials' trainers are killed (SIGKILL of the Tune actor's process), within and past
``[run] max_restarts``: one sweep of three trials, two at a time, a restart budget of 1.

trial-000 is killed once after its first validation: it is restarted, resumes from its latest checkpoint (step > 0) in its pool group, registered
again (released while it was down), and trial-001 trains on meanwhile. trial-001 is then killed twice: past the budget it is ``failed`` in the table
with the reason, its group is gone from the pool at once, and trial-002 takes its place. Every row's pool account
adds up. Cost: one sweep on the 3,000-node demo graph (three trial starts, three restarts, ~90 steps); it runs
about as long as one of test_sweep_cli.py's two sweeps (106-167 s against their 272 s together, all measured on
two cores shared at a load average of about 20).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.cli import ROOT, saintpipe_command
from tests.support.pipeline import small_dataset

from saintpipe.services.pool.pool import SubgraphPool

pytestmark = [pytest.mark.serial, pytest.mark.faults]

SWEEP = """
[pool]
job_id = "faults"
[run]
progress = false
metrics = false
max_restarts = 1
[samplers]
workers = 1
[trainer]
patience = 0
[trainer.model]
hidden = [32, 32]
[sweep]
concurrent = 2
scheduler = "none"
[sweep.space]
"epochs" = {grid = [30, 1000, 3]}  # trial-001 runs until it is killed past its budget
"""


def wait_for(what: str, check: Callable[[], object], proc: subprocess.Popen, timeout: float = 120) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        assert proc.poll() is None, f"the sweep ended (exit {proc.returncode}) before {what}"
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def steps(trial_dir: Path) -> int:
    """The trial's last recorded step (metrics.jsonl: a line per validation)."""
    path = trial_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return max((json.loads(line)["step"] for line in lines if line.endswith("}")), default=0)


def pid(trial_dir: Path) -> int:
    path = trial_dir / "trainer.pid"
    text = path.read_text().strip() if path.is_file() else ""
    return int(text) if text else 0


def test_a_killed_trial_resumes_from_its_checkpoint_and_one_past_its_budget_fails(tmp_path, redis_server):
    data = small_dataset(tmp_path / "demo")
    config = tmp_path / "sweep.toml"
    config.write_text(SWEEP)
    sweep_dir = tmp_path / "sweep"
    trials = {t: sweep_dir / "trials" / t for t in ("trial-000", "trial-001", "trial-002")}
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "SAINTPIPE_HOME": str(tmp_path / "home"), "SAINTPIPE_REDIS_URL": redis_server.url}
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen([*saintpipe_command(), "sweep", "--config", str(config), "--data", str(data),
                                 "--sweep-dir", str(sweep_dir)], env=env, stdout=out, stderr=err)
    pool = SubgraphPool(redis_server.url, "faults")
    try:
        a, b = trials["trial-000"], trials["trial-001"]
        # at once after trial-000's first checkpoint past step 0 (one at each epoch's end), well before its end
        first = wait_for("trial-000's checkpoint",
                         lambda: steps(a) > 0 and (a / "checkpoints" / "latest.pt").is_file() and pid(a), proc)
        os.kill(first, signal.SIGKILL)
        other_then = steps(b)  # trial-001 may still be starting: its first steps count as going on too
        second = wait_for("trial-000 restarted", lambda: pid(a) not in (0, first) and pid(a), proc)
        resumed_at = steps(a)  # lines past the checkpoint are dropped as it resumes; a new one means it trains
        wait_for("trial-000 training again", lambda: steps(a) > resumed_at, proc)
        assert steps(b) > other_then, "trial-001 made no step while trial-000 was down"
        assert "trial-001" in pool.groups() and "trial-000" in pool.groups()

        # trial-001 past its budget of one restart: failed, its group removed, trial-002 in its place
        killed = pid(b)
        os.kill(killed, signal.SIGKILL)
        again = wait_for("trial-001 restarted", lambda: pid(b) not in (0, killed) and pid(b), proc)
        os.kill(again, signal.SIGKILL)
        results = sweep_dir / "results.json"

        def failed_row() -> dict | None:
            rows = json.loads(results.read_text())["trials"] if results.is_file() else []
            return next((r for r in rows if r["trial"] == "trial-001"), None)

        row = wait_for("trial-001's row", failed_row, proc)
        assert "trial-001" not in pool.groups()  # removed before its row was written
        assert "trial-002" in pool.groups()
        assert second != first
        code = proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        pool.close()
    stdout = (tmp_path / "stdout.txt").read_text()
    assert code == 0, stdout + (tmp_path / "stderr.txt").read_text()
    assert isinstance(row, dict) and row["stopped_by"] == "failed" and row["restarts"] == 1
    assert row["error"].startswith("trainer killed 2 times, restart budget 1 per 600 s")
    assert "trial-000: trainer killed: restarting it from its latest checkpoint" in stdout

    rows = {r["trial"]: r for r in json.loads((sweep_dir / "results.json").read_text())["trials"]}
    assert sorted(rows) == ["trial-000", "trial-001", "trial-002"]
    assert rows["trial-000"]["stopped_by"] == "finished" and rows["trial-000"]["restarts"] == 1
    assert rows["trial-002"]["stopped_by"] == "finished" and rows["trial-002"]["restarts"] == 0
    assert json.loads((sweep_dir / "summary.json").read_text())["groups_left"] == []
    resumed = json.loads((trials["trial-000"] / "result.json").read_text())
    assert resumed["resumed_from_step"] > 0
    assert resumed["steps"] > resumed["resumed_from_step"]
    # one history: the steps go on from the checkpoint, no repeats
    recorded = [json.loads(line)["step"] for line in (trials["trial-000"] / "metrics.jsonl").read_text().splitlines()]
    assert recorded == sorted(recorded) and recorded[-1] == resumed["steps"]
    for r in rows.values():
        p = r["pool"]
        assert p["produced"] > 0
        assert p["produced"] == p["acknowledged"] + p["waiting"] + p["pending"] + p["dead_lettered"], r["trial"]
    with open(sweep_dir / "results.csv") as f:
        assert {r["trial"]: r["restarts"] for r in csv.DictReader(f)} == {
            "trial-000": "1", "trial-001": "1", "trial-002": "0"}
