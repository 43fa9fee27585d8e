"""A real Prometheus set up as docs/how-to/sweeps.md says (file_sd over a sweep's ``prometheus/*.json``) follows
the trials' endpoints as their files come and go, keeps each trial's trainer series under its `trial` and the pool's
backlog per consumer `group`; the dashboard's trainer and pool queries, with one trial picked on the Trial
selector, return that trial's lines and no other's.

The endpoints are real (each trial's trainer metrics in a process of its own, as each trial of a sweep has; the
pool gauges on the sampler service's registry); the sweep itself is the e2e test's (tests/e2e/sweep/), whose
trials are too short to be sure Prometheus scrapes them (it takes up new targets every 5 s). Cost: a few
seconds, most of it Prometheus taking up the targets.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from saintpipe.services.pool.metrics import PoolMetrics
from saintpipe.services.pool.pool import PoolStats
from saintpipe.sweep import targets
from tests.support.cli import ROOT, free_port
from tests.support.prometheus import Prometheus, dashboard_queries

TRIAL = """
import sys, time
from saintpipe.trainer.metrics import TrainerMetrics, serve_metrics
metrics = TrainerMetrics("local-trainer-0", sys.argv[1])
server = serve_metrics(0)
print(server.server_address[1], flush=True)
while True:  # a trial training: steps, data waits, gathers
    metrics.observe_step(0.02, 0.01, 0.005, 1.0)
    metrics.observe_features(100, 30, 2800)
    metrics.val_score(0.5)
    time.sleep(0.05)
"""


def stats(depth: int) -> PoolStats:
    return PoolStats(depth=depth, pending=1, produced=depth + 1, acknowledged=0, redelivered=0, dead_lettered=0,
                     capacity=64)


@pytest.fixture
def sweep(tmp_path):
    """Two trials' endpoints and the sampler service's pool gauges, listed as a sweep lists them."""
    sweep_dir = tmp_path / "sweep"
    registry = CollectorRegistry()
    PoolMetrics(registry).update_groups("local", {"trial-000": stats(3), "trial-001": stats(40)})
    httpd, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    targets.write_services(sweep_dir, {"samplers": f"http://127.0.0.1:{httpd.server_port}/metrics"})
    trials = {}
    try:
        for trial in ("trial-000", "trial-001"):
            proc = subprocess.Popen([sys.executable, "-c", TRIAL, trial], cwd=ROOT, stdout=subprocess.PIPE, text=True)
            trials[trial] = proc
            port = int(proc.stdout.readline())
            targets.write_trial(sweep_dir, trial, f"http://127.0.0.1:{port}")
        yield sweep_dir, trials
    finally:
        for proc in trials.values():
            proc.kill()
            proc.wait()
            proc.stdout.close()
        httpd.shutdown()
        httpd.server_close()


def test_prometheus_follows_the_trials_and_the_dashboard_picks_one(sweep, tmp_path):
    sweep_dir, trials = sweep
    prom = Prometheus([], tmp_path, free_port(), file_sd=str(sweep_dir / "prometheus" / "*.json"))
    try:
        prom.wait_ready()
        deadline = time.monotonic() + 60
        while True:  # rate() over [1m] needs two scrapes of each trial, and of the samplers' pool gauges
            rates = prom.query("rate(saintpipe_trainer_steps_total[1m]) > 0")
            pool = prom.query("rate(saintpipe_pool_produced_total[1m])")
            if ({r["metric"].get("trial") for r in rates} == set(trials)
                    and {r["metric"].get("group") for r in pool} == set(trials)) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert {r["metric"].get("trial") for r in rates} == set(trials), prom.targets_up()
        assert all(r["metric"]["component"] == "trainer" for r in rates)  # the target files' labels
        groups = {r["metric"]["group"]: float(r["value"][1]) for r in prom.query("saintpipe_pool_depth")}
        assert groups == {"trial-000": 3, "trial-001": 40}

        # the Trial selector on trial-001: every trainer and pool line is trial-001's, and each query has data
        picked = [(panel, expr) for panel, expr in dashboard_queries({"trial": "trial-001"})
                  if "saintpipe_trainer_" in expr or "saintpipe_pool_" in expr]
        assert len(picked) >= 15
        for panel, expr in picked:
            result = prom.query(expr)
            assert result, f"{panel}: no data: {expr}"
            for r in result:
                assert r["metric"].get("trial", "trial-001") == "trial-001", (panel, r["metric"])
                assert r["metric"].get("group", "trial-001") == "trial-001", (panel, r["metric"])

        # trial-000 ends: its file goes, and Prometheus stops scraping it
        targets.remove_trial(sweep_dir, "trial-000")
        deadline = time.monotonic() + 30
        while any(r["metric"].get("trial") == "trial-000" for r in prom.query("saintpipe_trainer_steps_total")):
            assert time.monotonic() < deadline, prom.targets_up()
            time.sleep(0.5)
        assert {r["metric"].get("trial") for r in prom.query("saintpipe_trainer_steps_total")} == {"trial-001"}
    finally:
        prom.stop()
