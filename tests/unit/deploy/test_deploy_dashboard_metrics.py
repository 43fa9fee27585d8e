"""The Grafana dashboard and the Prometheus scrape config speak docs/metrics.md's names.

docs/metrics.md is the contract between the services and these files: every
metric a dashboard query names must be in its table (histogram series only
with their _bucket/_sum/_count suffixes), every metric in the table is on some
panel, the panels the deployment promises are there, and Prometheus scrapes
every metrics port the compose file opens.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.support.compose import as_list, load_compose, read_env_file

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "saintpipe.json"
METRICS_DOC = ROOT / "docs" / "metrics.md"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"


def documented_metrics() -> dict[str, str]:
    """{name: type} from the table in docs/metrics.md."""
    rows = re.findall(r"^\| `(saintpipe_[a-z0-9_]+)` \| ([^|]+?) \|", METRICS_DOC.read_text(), flags=re.MULTILINE)
    assert len(rows) >= 20, "could not read the metrics table of docs/metrics.md"
    return {name: kind.split()[0] for name, kind in rows}


def dashboard_targets() -> list[tuple[str, str]]:
    """(panel title, expr) for every query of every panel."""
    dashboard = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"]))
    return out


def test_dashboard_is_a_grafana_dashboard_bound_to_a_prometheus_datasource_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "saintpipe" and dashboard["schemaVersion"] >= 36
    (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == "datasource"]
    assert variable["type"] == "datasource" and variable["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]


def test_every_metric_the_dashboard_queries_is_in_the_contract():
    documented = documented_metrics()
    for title, expr in dashboard_targets():
        for name in re.findall(r"\bsaintpipe_[a-z0-9_]+", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if base != name:
                assert documented.get(base) == "histogram", f"{title}: {name} is not a histogram's series"
            else:
                assert name in documented, f"{title}: {name} is not in docs/metrics.md"
                assert documented[name] != "histogram", f"{title}: query {name}_bucket/_sum/_count, not {name}"
            if documented.get(base) == "counter":
                assert re.search(rf"(rate|increase)\({name}\[", expr), f"{title}: a counter needs rate()/increase()"


def test_every_metric_of_the_contract_is_on_a_panel():
    used = {re.sub(r"_(bucket|sum|count)$", "", n)
            for _, expr in dashboard_targets() for n in re.findall(r"\bsaintpipe_[a-z0-9_]+", expr)}
    assert set(documented_metrics()) - used == set()


@pytest.mark.parametrize("needle, must_contain", [
    ("Sampler throughput per worker", ["sum by (worker) (rate(saintpipe_sampler_subgraphs_total[1m]))",
                                       "sum(rate(saintpipe_sampler_subgraphs_total[1m]))"]),
    ("Pool depth and pending", ["saintpipe_pool_depth", "saintpipe_pool_pending"]),
    ("Redeliveries and dead letters", ["saintpipe_pool_redelivered_total", "saintpipe_pool_dead_lettered_total"]),
    ("Feature gather latency p50 / p99", [
        "histogram_quantile(0.5, sum by (le) (rate(saintpipe_feature_request_seconds_bucket[1m])))",
        "histogram_quantile(0.99, sum by (le) (rate(saintpipe_feature_request_seconds_bucket[1m])))"]),
    ("Feature bytes/s", ["rate(saintpipe_feature_bytes_total[1m])"]),
    ("Feature cache hit rate", [("sum(rate(saintpipe_feature_cache_hits_total[1m])) / "
                                 "(sum(rate(saintpipe_feature_cache_hits_total[1m])) + "
                                 "sum(rate(saintpipe_feature_cache_misses_total[1m])))")]),
    ("Trainer step time", ["saintpipe_trainer_step_seconds_sum", "saintpipe_trainer_step_seconds_count"]),
    ("Share of time trainers waited for data", [(
        "sum(rate(saintpipe_trainer_data_wait_seconds_total[1m])) / "
        "(sum(rate(saintpipe_trainer_data_wait_seconds_total[1m])) + "
        "sum(rate(saintpipe_trainer_step_seconds_sum[1m])))")]),
])
def test_the_promised_panels_exist(needle, must_contain):
    exprs = [expr for title, expr in dashboard_targets() if title == needle]
    assert exprs, f"no panel titled {needle!r}"
    for fragment in must_contain:
        assert any(fragment in expr for expr in exprs), f"{needle}: no query contains {fragment}"


def test_prometheus_scrapes_every_metrics_port_compose_opens():
    compose = load_compose(ROOT / "docker-compose.yml", read_env_file(ROOT / ".env.example"))
    wanted = set()
    for name, service in compose["services"].items():
        command = as_list(service.get("command"))
        if "--metrics-port" in command:
            wanted.add(f"{name}:{command[command.index('--metrics-port') + 1]}")
    config = yaml.safe_load(PROMETHEUS.read_text())
    targets = {t for job in config["scrape_configs"] for sc in job.get("static_configs", []) for t in sc["targets"]}
    assert wanted and wanted <= targets
    assert targets - wanted == {"127.0.0.1:9090"}, "scrape only what compose runs (and Prometheus itself)"


def test_grafana_datasource_points_at_the_compose_prometheus():
    provisioning = ROOT / "deploy" / "grafana" / "provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090" and source["isDefault"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "saintpipe.yml").read_text())["providers"]
    assert provider["type"] == "file" and provider["options"]["path"] == "/var/lib/grafana/dashboards"
