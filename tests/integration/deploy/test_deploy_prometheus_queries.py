"""A real Prometheus accepts the scrape configuration and every dashboard query.

`promtool check config` checks deploy/prometheus/prometheus.yml (the compose
hostnames need not resolve for that). Then a real Prometheus server, on a free
loopback port with a tiny config, evaluates every query of every dashboard
panel through its HTTP API: each must come back "success" (with no pipeline
running the data is empty; the whole-pipeline test checks that data arrives).
Debian's `prometheus` package provides both binaries (scripts/tools.sh, run by the README's test command, fetches it
without root).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from tests.support.cli import free_port
from tests.support.prometheus import prometheus_tool, with_variables

ROOT = Path(__file__).resolve().parents[3]
DASHBOARDS = sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json"))


def _binary(name: str) -> str:
    return prometheus_tool(name)  # PATH, else what ./scripts/tools.sh fetched; a skip saying why otherwise


def _get(url: str, timeout: float = 5.0) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory):
    binary = _binary("prometheus")
    work = tmp_path_factory.mktemp("prometheus")
    port = free_port()
    config = work / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        f"scrape_configs:\n  - job_name: self\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
    log = (work / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited {proc.returncode}: {(work / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("prometheus did not become ready in 30 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_promtool_accepts_the_scrape_configuration():
    promtool = _binary("promtool")
    proc = subprocess.run([promtool, "check", "config", str(ROOT / "deploy" / "prometheus" / "prometheus.yml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_promtool_rejects_a_broken_configuration(tmp_path):
    promtool = _binary("promtool")
    broken = tmp_path / "prometheus.yml"
    broken.write_text("scrape_configs:\n  - job_name: x\n    scrape_interval: often\n")
    proc = subprocess.run([promtool, "check", "config", str(broken)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0


def _queries(picked: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(dashboard, panel [refId], PromQL as Grafana sends it: the variables at their defaults, or ``picked``)."""
    out = []
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                out.append((path.name, f"{panel['title']} [{target['refId']}]",
                            with_variables(target["expr"], dashboard, picked)))
    return out


def test_there_are_dashboard_queries_to_check():
    assert len(_queries()) >= 20


@pytest.mark.parametrize("picked", [None, {"trial": "trial-000|trial-002"}], ids=["all trials", "two trials"])
def test_every_dashboard_query_evaluates_on_a_real_prometheus(prometheus_url, picked):
    failures = []
    for dashboard, panel, expr in _queries(picked):
        assert "$" not in expr, f"{panel}: a variable left in {expr}"
        for endpoint, extra in (("query", {}),
                                ("query_range", {"start": str(time.time() - 300), "end": str(time.time()),
                                                 "step": "15"})):
            params = urllib.parse.urlencode({"query": expr, **extra})
            status, body = _get(f"{prometheus_url}/api/v1/{endpoint}?{params}")
            if status != 200 or body.get("status") != "success":
                failures.append(f"{dashboard} / {panel} ({endpoint}): {body.get('error', status)}\n  {expr}")
    assert failures == []


def test_the_server_rejects_a_malformed_query(prometheus_url):
    # The check above has teeth: a broken expression is an error, not an empty result.
    params = urllib.parse.urlencode({"query": "sum(rate(saintpipe_sampler_subgraphs_total[1m])"})
    status, body = _get(f"{prometheus_url}/api/v1/query?{params}")
    assert status == 400 and body["status"] == "error" and body["errorType"] == "bad_data"
