"""The Grafana dashboard and the Prometheus scrape config speak the names of the metric list.

The metric list (docs/reference/metric-list.md, generated from the metric objects in the code) is the
contract between the services and these files: every metric a dashboard query names must be on it
(histogram series only with their _bucket/_sum/_count suffixes), every metric on it is on some panel, the
panels the deployment promises are there, and Prometheus scrapes every metrics port the compose file opens.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.support.compose import as_list, load_compose, read_env_file
from tests.support.metrics_contract import DASHBOARD, documented_labels, documented_metrics, metric_use_problems

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"


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
    problems = [p for title, expr in dashboard_targets() for p in metric_use_problems(title, expr, documented)]
    assert problems == []


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
        'sum(rate(saintpipe_trainer_data_wait_seconds_total{trial=~"$trial"}[1m])) / '
        '(sum(rate(saintpipe_trainer_data_wait_seconds_total{trial=~"$trial"}[1m])) + '
        'sum(rate(saintpipe_trainer_step_seconds_sum{trial=~"$trial"}[1m])))')]),
    # a sweep: one fleet feeding several trials, each trial's backlog a line of its own
    ("Pool depth and pending", ['sum by (job, group) (saintpipe_pool_depth{group=~"$trial"})',
                                'sum by (job, group) (saintpipe_pool_pending{group=~"$trial"})']),
    ("Validation score", ['saintpipe_trainer_val_score{trial=~"$trial"}']),
])
def test_the_promised_panels_exist(needle, must_contain):
    exprs = [expr for title, expr in dashboard_targets() if title == needle]
    assert exprs, f"no panel titled {needle!r}"
    for fragment in must_contain:
        assert any(fragment in expr for expr in exprs), f"{needle}: no query contains {fragment}"


def test_the_trial_variable_lists_the_trainers_trials_and_every_trainer_query_uses_it():
    dashboard = json.loads(DASHBOARD.read_text())
    (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == "trial"]
    assert variable["type"] == "query" and variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert variable["query"] == "label_values(saintpipe_trainer_steps_total, trial)"
    assert "trial" in documented_labels()["saintpipe_trainer_steps_total"]
    # several at once, and "All" is every series, a plain run's too (no trial label: Grafana's own "All"
    # would be the values found, none)
    assert variable["multi"] and variable["includeAll"] and variable["allValue"] == ".*"
    assert variable["current"]["value"] == "$__all"
    trainer = [(t, e) for t, e in dashboard_targets() if "saintpipe_trainer_" in e]
    assert len(trainer) >= 10
    for title, expr in trainer:
        selectors = re.findall(r"saintpipe_trainer_[a-z_]+(\{[^}]*\})?", expr)
        assert selectors and all(sel == '{trial=~"$trial"}' for sel in selectors), (title, expr)
    # the per-trainer lines keep a sweep's trials apart (they share the trainer's name) and say which is which
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            if "saintpipe_trainer_" in target["expr"] and target["legendFormat"] != "all trainers":
                assert "by (trainer)" not in target["expr"], panel["title"]
                assert "{{trial}}" in target["legendFormat"] or target["legendFormat"] == "p99", panel["title"]


def test_every_pool_panel_shows_a_line_per_consumer_group_and_the_sampler_panels_one_fleet():
    pool = [(t, e) for t, e in dashboard_targets() if "saintpipe_pool_" in e]
    assert len(pool) >= 7
    for title, expr in pool:
        assert expr.startswith("sum by (job, group) (") and 'group=~"$trial"' in expr, (title, expr)
    assert "group" in documented_labels()["saintpipe_pool_depth"]
    for title, expr in dashboard_targets():
        if "saintpipe_sampler_" in expr:
            assert "trial" not in expr and "group" not in expr, (title, expr)


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


def test_the_contract_check_has_teeth():
    documented = documented_metrics()
    assert metric_use_problems("p", "saintpipe_pool_depth", documented) == []
    assert metric_use_problems("p", "saintpipe_no_such_metric", documented) == [
        "p: saintpipe_no_such_metric is not on the metric list (docs/reference/metric-list.md)"]
    assert "only grows" in " ".join(metric_use_problems("p", "sum(saintpipe_trainer_steps_total)", documented))
    assert "_bucket" in " ".join(metric_use_problems("p", "saintpipe_feature_request_seconds", documented))
    assert metric_use_problems("p", 'rate(saintpipe_trainer_steps_total{trial=~"$trial"}[1m])', documented) == []
    assert "only grows" in " ".join(
        metric_use_problems("p", 'sum(saintpipe_trainer_steps_total{trial=~"$trial"})', documented))
