"""The alert rules (deploy/prometheus/alerts.yml, docs/how-to/monitoring.md): valid, unit-tested, one rule set in
two places.

promtool (Debian's prometheus package) checks the rules, runs their unit tests
(alerts.test.yml: for every alert a case where it fires and healthy ones where
it does not) and checks the compose Prometheus config laid out as the compose
file mounts it. Without promtool those tests skip. The rest needs no binary:
the chart's copy is byte-identical and renders as a PrometheusRule holding the
same groups, every alert has what an on-call person needs (and a section of
docs/how-to/monitoring.md), every metric a rule reads is on the metric list
(docs/reference/metric-list.md), and both scrape setups keep the training job
in `job` (honor_labels), which the rules rely on.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import helm_python as helm
import yaml

from tests.support.compose import as_list, load_compose, parse_volume, read_env_file
from tests.support.metrics_contract import DASHBOARD, documented_metrics, metric_list_page, metric_use_problems
from tests.support.prometheus import prometheus_tool

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
ALERTS = PROMETHEUS_DIR / "alerts.yml"
ALERTS_TEST = PROMETHEUS_DIR / "alerts.test.yml"
PROMETHEUS = PROMETHEUS_DIR / "prometheus.yml"
CHART = ROOT / "helm" / "saintpipe"
CHART_ALERTS = CHART / "rules" / "alerts.yml"
ALERTS_DOC = ROOT / "docs" / "how-to" / "monitoring.md"

REQUIRED = {
    "SaintpipePoolEmptyTrainersWaiting",
    "SaintpipeSamplerThroughputZero",
    "SaintpipeFeatureShardErrors",
    "SaintpipeTrainerNotStepping",
}
# Labels a rule may group or join by besides those the metric list gives: the scrape target's, and the
# name honor_labels: false would give the pool gauges' `job`.
TARGET_LABELS = {"job", "instance", "exported_job"}
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset"}


def promtool() -> str:
    return prometheus_tool("promtool")  # PATH, else what ./scripts/tools.sh fetched; a skip saying why otherwise


def run_promtool(*args: str, cwd: Path = ROOT) -> str:
    result = subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"promtool {' '.join(args)} failed:\n{output}"
    return output


def groups() -> list[dict]:
    return yaml.safe_load(ALERTS.read_text())["groups"]


def alerts() -> dict[str, dict]:
    out = {}
    for group in groups():
        for rule in group["rules"]:
            if "alert" in rule:
                assert rule["alert"] not in out, f"alert {rule['alert']} defined twice"
                out[rule["alert"]] = rule
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, labels, strings or keywords)."""
    expr = re.sub(r'"[^"]*"', '""', expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\[[^\]]*\]|\{[^}]*\}", " ", expr)
    names = re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", expr)
    return set(names) - PROMQL_KEYWORDS


def render(values: dict | None = None) -> list[dict]:
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values, name="rel", namespace="ml", is_install=True)
    return [d for name, text in rendered.items() if name.endswith(".yaml") for d in yaml.safe_load_all(text) if d]


# ------------------------------------------------------------------ promtool


def test_promtool_checks_the_rules():
    out = run_promtool("check", "rules", str(ALERTS))
    assert f"SUCCESS: {len(alerts())} rules found" in out, out


def test_promtool_unit_tests_pass():
    # Run from the file's directory: its rule_files entry is relative to it.
    out = run_promtool("test", "rules", ALERTS_TEST.name, cwd=ALERTS_TEST.parent)
    assert "SUCCESS" in out, out


def test_compose_prometheus_loads_the_rules_where_compose_mounts_them(tmp_path):
    """Lay the files out as the container sees them (the prometheus service's bind mounts), then check the
    config there: its rule_files resolve relative to the config file's directory."""
    compose = load_compose(ROOT / "docker-compose.yml", read_env_file(ROOT / ".env.example"))
    service = compose["services"]["prometheus"]
    mounts = {m.target: m for m in map(parse_volume, service["volumes"])}
    config_target = next(a.split("=", 1)[1] for a in as_list(service["command"]) if a.startswith("--config.file="))
    assert (ROOT / mounts[config_target].source).resolve() == PROMETHEUS
    config = yaml.safe_load(PROMETHEUS.read_text())
    assert config["rule_files"], "prometheus.yml loads no rule file"
    for entry in config["rule_files"]:
        target = str(Path(config_target).parent / entry) if not entry.startswith("/") else entry
        assert target in mounts, f"rule file {entry} ({target} in the container) is not mounted"
        assert mounts[target].read_only
        assert (ROOT / mounts[target].source).resolve() == ALERTS
    # The container's /etc/prometheus, here.
    for target, mount in mounts.items():
        if (ROOT / mount.source).is_file():
            dest = tmp_path / target.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / mount.source, dest)
    out = run_promtool("check", "config", str(tmp_path / config_target.lstrip("/")))
    assert f"SUCCESS: {len(config['rule_files'])} rule files found" in out, out
    assert f"SUCCESS: {len(alerts())} rules found" in out, out


# ------------------------------------------------------------------ the rules themselves


def test_chart_copy_is_byte_identical():
    assert CHART_ALERTS.read_bytes() == ALERTS.read_bytes(), \
        "copy deploy/prometheus/alerts.yml to helm/saintpipe/rules/alerts.yml"


def test_required_alerts_exist_with_for_severity_and_annotations():
    found = alerts()
    assert REQUIRED <= set(found), f"missing alerts: {REQUIRED - set(found)}"
    for name, rule in found.items():
        assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), f"{name}: needs a for: duration"
        assert rule.get("labels", {}).get("severity") in {"warning", "critical"}, f"{name}: severity"
        annotations = rule.get("annotations", {})
        assert set(annotations) >= {"summary", "description"}, f"{name}: summary and description"
        for key in ("summary", "description"):
            assert "$labels.job" in annotations[key], f"{name}: the {key} does not name the job label"
        assert "docs/how-to/monitoring.md" in annotations["description"], \
            f"{name}: point the description at docs/how-to/monitoring.md"


def test_dashboard_panels_the_descriptions_name_exist():
    """Double quotes in a description name a dashboard panel (log lines are in single quotes)."""
    titles = {p["title"] for p in json.loads(DASHBOARD.read_text())["panels"]}
    for name, rule in alerts().items():
        named = re.findall(r'"([^"]+)"', rule["annotations"]["description"])
        assert named, f"{name}: the description names no dashboard panel"
        for title in named:
            assert title in titles, f"{name}: no dashboard panel titled {title!r}"


def test_every_metric_a_rule_reads_is_documented():
    documented = documented_metrics()
    for name, rule in alerts().items():
        expr = rule["expr"]
        used = metric_names(expr)
        assert used - {"up"}, f"{name}: reads no saintpipe metric"
        assert all(m == "up" or m.startswith("saintpipe_") for m in used), f"{name}: reads {used}"
        assert metric_use_problems(name, expr, documented) == []


def test_labels_a_rule_groups_or_joins_by_are_documented():
    documented_labels = set(re.findall(r"`([a-z_]+)`", " ".join(
        re.findall(r"^\| `saintpipe_[a-z0-9_]+` \| [^|]+ \| ([^|]+) \|", metric_list_page(), re.MULTILINE))))
    assert {"worker", "job", "shard", "code", "trainer"} <= documented_labels
    for name, rule in alerts().items():
        expr = rule["expr"]
        grouped = {label.strip() for group in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr)
                   for label in group.split(",") if label.strip()}
        # label_replace(v, "dst", "$1", "src", "regex"): the source label is read.
        replaced = set(re.findall(r'"[a-z_]+",\s*"\$\d",\s*"([a-z_]+)"', expr))
        assert "label_replace" not in expr or replaced, f"{name}: cannot read its label_replace calls"
        read = grouped | replaced
        assert read <= documented_labels | TARGET_LABELS, f"{name}: labels {read - documented_labels - TARGET_LABELS}"


def test_the_training_job_regex_matches_the_trainers_names():
    """The rules read the training job out of the `trainer` label: trainer_name(job, rank) must fit."""
    from saintpipe.trainer.assemble import trainer_name

    regexes = set()
    for rule in alerts().values():
        regexes |= set(re.findall(r'"job",\s*"\$1",\s*"trainer",\s*"([^"]+)"', rule["expr"]))
    assert regexes, "no rule reads the training job out of the trainer label"
    for regex in regexes:
        for job in ("demo", "compose-test", "products-trainer-2"):
            for rank in (0, 3, 12):
                found = re.fullmatch(regex, trainer_name(job, rank))  # Prometheus anchors its regexes
                assert found and found.group(1) == job, (regex, job, rank)


def test_every_alert_is_unit_tested_firing_and_quiet():
    tests = yaml.safe_load(ALERTS_TEST.read_text())
    assert tests["rule_files"] == [ALERTS.name]
    firing: dict[str, int] = {}
    quiet: dict[str, int] = {}
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            name = check["alertname"]
            if check.get("exp_alerts"):
                firing[name] = firing.get(name, 0) + 1
                for expected in check["exp_alerts"]:
                    rule = alerts()[name]
                    assert expected["exp_labels"]["severity"] == rule["labels"]["severity"], name
                    assert set(expected.get("exp_annotations", {})) >= {"summary", "description"}, name
            else:
                quiet[name] = quiet.get(name, 0) + 1
    for name in alerts():
        assert firing.get(name), f"{name}: no promtool test where it fires"
        assert quiet.get(name), f"{name}: no promtool test where it stays quiet"
    assert set(firing) | set(quiet) <= set(alerts()), "a promtool test names an alert alerts.yml lacks"


def test_docs_have_a_section_per_alert():
    text = ALERTS_DOC.read_text()
    for name in alerts():
        assert re.search(rf"^##+ `?{name}`?$", text, re.MULTILINE), \
            f"{ALERTS_DOC.relative_to(ROOT)}: no section for {name}"


# ------------------------------------------------------------------ the job label: both scrape setups


def test_compose_scrape_keeps_the_training_job_label():
    config = yaml.safe_load(PROMETHEUS.read_text())
    for job in config["scrape_configs"]:
        if job["job_name"].startswith("saintpipe"):
            assert job.get("honor_labels") is True, f"{job['job_name']}: honor_labels: true (the pool's job label)"


def test_service_monitor_keeps_the_training_job_label():
    docs = render({"monitoring": {"serviceMonitor": {"enabled": True}}})
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"]
    assert all(e.get("honorLabels") is True for e in monitor["spec"]["endpoints"])


# ------------------------------------------------------------------ the chart's PrometheusRule


def test_chart_renders_the_rules_as_a_prometheus_rule():
    labels = {"release": "kube-prometheus-stack", "team": "ml"}
    docs = render({"monitoring": {"prometheusRule": {"enabled": True, "labels": labels}}})
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    meta = rule["metadata"]
    assert meta["name"] == "rel-saintpipe" and meta["namespace"] == "ml"
    assert labels.items() <= meta["labels"].items()
    assert meta["labels"]["app.kubernetes.io/instance"] == "rel"
    assert meta["labels"]["app.kubernetes.io/component"] == "monitoring"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert set(rule["spec"]) == {"groups"}
    assert rule["spec"]["groups"] == groups()


def test_chart_renders_no_prometheus_rule_unless_enabled():
    assert not [d for d in render() if d["kind"] == "PrometheusRule"]
    docs = render({"monitoring": {"prometheusRule": {"enabled": False, "labels": {"release": "x"}}}})
    assert not [d for d in docs if d["kind"] == "PrometheusRule"]
