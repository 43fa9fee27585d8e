"""The Grafana dashboard is generated with Grafana's Foundation SDK and fits Grafana's schema.

deploy/grafana/dashboard.py builds the dashboard with the SDK's builders and
writes deploy/grafana/dashboards/saintpipe.json (compose) and
helm/saintpipe/dashboards/saintpipe.json (the chart's ConfigMap). Checked here:
both committed files are exactly its output (a hand edit fails); the JSON
decodes into the SDK's types with nothing lost, unknown or mistyped
(tests/support/grafana.py says how), each panel into its panel plugin's
types; the validator rejects what Grafana's schema rejects (the negative
cases); the panels use the provisioned Prometheus datasource; and the chart
delivers the dashboard to Grafana's sidecar where values.yaml says.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, prometheus, stat, timeseries
from grafana_foundation_sdk.models import dashboard as dashboard_model

from tests.support.grafana import (
    DASHBOARD_FILES,
    DashboardSchemaError,
    dashboard_schema_problems,
    load_generator,
    validate_dashboard,
)

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm" / "saintpipe"
DATASOURCES = ROOT / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
GENERATOR = load_generator()


@pytest.fixture(scope="module")
def generated() -> dict:
    return GENERATOR.build()


def all_panels(dashboard: dict) -> list[dict]:
    """Every panel, rows' nested panels (a collapsed row's) included."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


# -- (a) the committed JSON is the generator's output ------------------------------------------------


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_json_is_what_the_generator_writes(path, generated):
    hint = f"{path.relative_to(ROOT)} differs from deploy/grafana/dashboard.py: edit that, then run it"
    assert path.read_text() == GENERATOR.render(), hint
    assert json.loads(path.read_text()) == generated, hint


def test_the_generator_runs_as_a_script_and_its_check_passes():
    done = subprocess.run([sys.executable, str(ROOT / "deploy" / "grafana" / "dashboard.py"), "--check"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_check_names_the_stale_copy_and_a_run_rewrites_it(tmp_path, monkeypatch, capsys):
    fresh, stale = tmp_path / "fresh.json", tmp_path / "stale.json"
    fresh.write_text(GENERATOR.render())
    edited = json.loads(GENERATOR.render())
    edited["panels"][1]["title"] = "edited by hand"
    stale.write_text(json.dumps(edited, indent=2) + "\n")
    monkeypatch.setattr(GENERATOR, "ROOT", tmp_path)
    monkeypatch.setattr(GENERATOR, "OUTPUTS", (fresh, stale))
    assert GENERATOR.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "stale.json" in err and "fresh.json" not in err
    assert GENERATOR.main([]) == 0
    assert stale.read_text() == GENERATOR.render()
    assert GENERATOR.main(["--check"]) == 0


def test_the_build_is_deterministic():
    assert GENERATOR.render() == GENERATOR.render()


# -- (b) the JSON decodes into the SDK's types with nothing lost or unknown ----------------------------


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_dashboard_fits_grafanas_schema(path):
    data = json.loads(path.read_text())
    assert dashboard_schema_problems(data) == []
    parsed = validate_dashboard(data)
    # Decoded and encoded again by the SDK it is the same JSON, field for field.
    assert json.loads(json.dumps(parsed, cls=JSONEncoder)) == data


# -- (c) panel types and their options ------------------------------------------------------------------


PANEL_TYPES = {
    # panel type: (its options type, its fieldConfig.defaults.custom type or None)
    "timeseries": (timeseries.Options, common.GraphFieldConfig),
    "stat": (stat.Options, None),
}


def test_every_panel_is_a_plugin_the_sdk_knows_and_decodes_into_its_types(generated):
    plugins.register_default_plugins()
    parsed = validate_dashboard(generated)
    kinds = set()
    for panel in parsed.panels:
        if isinstance(panel, dashboard_model.RowPanel):
            # Not collapsed: the row's panels follow it on the top level, where
            # tests/support/prometheus.py's dashboard_queries reads them.
            assert not panel.collapsed and panel.panels == [], panel.title
            continue
        kinds.add(panel.type_val)
        assert cogruntime.panelcfg_config(panel.type_val) is not None, panel.title
        options_type, custom_type = PANEL_TYPES[panel.type_val]
        assert isinstance(panel.options, options_type), panel.title
        if custom_type is not None:
            assert isinstance(panel.field_config.defaults.custom, custom_type), panel.title
        assert panel.targets and all(isinstance(t, prometheus.Dataquery) for t in panel.targets), panel.title
    assert kinds == set(PANEL_TYPES)


# -- identity, ids, layout, datasource -----------------------------------------------------------------


def test_uid_fits_grafana_and_panel_ids_are_unique(generated):
    assert 0 < len(generated["uid"]) <= 40 and generated["uid"] == "saintpipe"
    ids = [p["id"] for p in all_panels(generated)]
    assert all(isinstance(i, int) for i in ids) and len(ids) == len(set(ids))


def test_panels_fit_the_grid_without_overlapping(generated):
    cells: dict[tuple[int, int], str] = {}
    for panel in generated["panels"]:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_every_panel_and_query_uses_the_provisioned_prometheus(generated):
    (source,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"]
    variables = {v["name"]: v for v in generated["templating"]["list"]}
    # The variable lists the datasources of the provisioned one's type, and picks the default: it.
    refs = [{"type": source["type"], "uid": source["uid"]}]
    for name, variable in variables.items():
        if variable["type"] == "datasource" and variable["query"] == source["type"]:
            refs.append({"type": source["type"], "uid": "${" + name + "}"})
    assert len(refs) == 2, "no datasource variable for the provisioned Prometheus"
    for panel in all_panels(generated):
        if panel["type"] == "row":
            continue
        assert panel.get("datasource") in refs, panel["title"]
        for target in panel["targets"]:
            assert target.get("datasource") in refs, f"{panel['title']} [{target['refId']}]"


# -- (d) the validator rejects what Grafana's schema rejects ------------------------------------------


def _panel(data: dict, title: str) -> dict:
    (found,) = [p for p in data["panels"] if p.get("title") == title]
    return found


TS = "Sampler throughput per worker"
STAT = "Time waiting for data"

BREAKAGES: dict[str, tuple[Callable[[dict], None], str]] = {
    # name: (how the copy is broken, a fragment of the problem reported)
    "gridPos.h a string": (lambda d: _panel(d, TS)["gridPos"].update(h="8"), "grid_pos.h: int expected"),
    "unknown panel key": (lambda d: _panel(d, TS).update(bogus=True), ".bogus: not a field"),
    "unknown dashboard key": (lambda d: d.update(panelz=[]), "dashboard.panelz: not a field"),
    "unknown key in panel options": (lambda d: _panel(d, TS)["options"]["legend"].update(position="left"),
                                     "options.legend.position: not a field"),
    "unknown key in fieldConfig.custom": (
        lambda d: _panel(d, TS)["fieldConfig"]["defaults"]["custom"].update(lineWidthPx=2),
        "custom.lineWidthPx: not a field"),
    "unknown key in a query": (lambda d: _panel(d, TS)["targets"][0].update(query="up"),
                               "targets[0].query: not a field"),
    "PromQL not a string": (lambda d: _panel(d, TS)["targets"][0].update(expr=["up"]), "expr: str expected"),
    "unknown panel type": (lambda d: _panel(d, TS).update(type="timeseriez"), "panel type 'timeseriez'"),
    "unknown datasource type": (
        lambda d: [x.update(datasource={"type": "influxdbz", "uid": "x"})
                   for x in [_panel(d, TS), *_panel(d, TS)["targets"]]],
        "datasource type is not one"),
    "enum value out of range": (lambda d: d.update(graphTooltip=3), "graph_tooltip: 3 is not one of"),
    "enum in panel plugin options": (
        lambda d: _panel(d, TS)["fieldConfig"]["defaults"]["custom"].update(drawStyle="curve"),
        "draw_style: \"curve\" is not one of"),
    "stat calcs not a list": (lambda d: _panel(d, STAT)["options"]["reduceOptions"].update(calcs="mean"),
                              "calcs: a list is expected"),
    "threshold value a string": (
        lambda d: _panel(d, STAT)["fieldConfig"]["defaults"]["thresholds"]["steps"][1].update(value="0.2"),
        "steps[1].value: float expected"),
    "unit not a string": (lambda d: _panel(d, STAT)["fieldConfig"]["defaults"].update(unit=1),
                          "unit: str expected"),
    "row collapsed not a bool": (lambda d: d["panels"][0].update(collapsed="false"),
                                 "collapsed: bool expected"),
    "refresh a number": (lambda d: d.update(refresh=5), "dashboard.refresh: 5 is none of"),
    "gridPos a list": (lambda d: _panel(d, TS).update(gridPos=[8, 10, 4, 1]),
                       "gridPos: [8, 10, 4, 1] came back"),
    "panel without a type": (lambda d: _panel(d, TS).pop("type"), "cannot decode"),
    "variable hide out of range": (lambda d: d["templating"]["list"][0].update(hide=5),
                                   "hide: 5 is not one of"),
}


@pytest.mark.parametrize("name", list(BREAKAGES))
def test_the_validator_rejects_a_broken_dashboard(name, generated):
    breakage, fragment = BREAKAGES[name]
    broken = copy.deepcopy(generated)
    breakage(broken)
    problems = dashboard_schema_problems(broken)
    assert any(fragment in p for p in problems), problems
    with pytest.raises(DashboardSchemaError):
        validate_dashboard(broken)


def test_the_validator_accepts_what_grafana_accepts_not_only_the_sdks_own_output(generated):
    """Fields left to their defaults are fine: the check is Grafana's schema, not byte equality."""
    trimmed = copy.deepcopy(generated)
    for key in ("style", "fiscalYearStartMonth", "editable"):
        trimmed.pop(key)
    for panel in trimmed["panels"]:
        for key in ("transparent", "transformations", "repeatDirection"):
            panel.pop(key, None)
    trimmed["templating"]["list"][0].pop("auto_count")
    assert dashboard_schema_problems(trimmed) == []


# -- (3) the chart delivers the dashboard to Grafana's sidecar ------------------------------------------


def render_configmap(values: dict | None = None, namespace: str = "ml") -> dict | None:
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values, name="rel", namespace=namespace, is_install=True)
    text = rendered.get("saintpipe/templates/grafana-dashboard.yaml", "")
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert len(docs) <= 1
    return docs[0] if docs else None


def dashboard_values(**dashboard) -> dict:
    return {"grafana": {"dashboard": dashboard}}


def test_configmap_defaults_to_the_release_namespace_with_the_sidecar_label(generated):
    configmap = render_configmap()
    meta = configmap["metadata"]
    assert meta["name"] == "rel-saintpipe-dashboard" and meta["namespace"] == "ml"
    assert meta["labels"]["grafana_dashboard"] == "1"
    assert "annotations" not in meta, "no folder, no annotations by default"
    assert json.loads(configmap["data"]["saintpipe.json"]) == generated


def test_configmap_goes_to_the_namespace_grafana_watches():
    configmap = render_configmap(dashboard_values(namespace="monitoring"))
    assert configmap["metadata"]["namespace"] == "monitoring"


def test_configmap_carries_custom_labels():
    labels = render_configmap(dashboard_values(labels={"team": "ml"}))["metadata"]["labels"]
    assert labels["team"] == "ml" and labels["grafana_dashboard"] == "1"
    assert labels["app.kubernetes.io/instance"] == "rel"
    relabelled = render_configmap(dashboard_values(labels={"grafana_dashboard": "saintpipe"}))
    labels = relabelled["metadata"]["labels"]
    assert labels["grafana_dashboard"] == "saintpipe"


def test_folder_becomes_the_grafana_folder_annotation_merged_with_the_others():
    meta = render_configmap(dashboard_values(folder="ML pipelines"))["metadata"]
    assert meta["annotations"] == {"grafana_folder": "ML pipelines"}
    meta = render_configmap(dashboard_values(folder="ML", annotations={"owner": "ml-platform"}))["metadata"]
    assert meta["annotations"] == {"grafana_folder": "ML", "owner": "ml-platform"}
    meta = render_configmap(dashboard_values(annotations={"owner": "ml-platform"}))["metadata"]
    assert meta["annotations"] == {"owner": "ml-platform"}


def test_custom_configmap_is_valid_kubernetes_and_carries_the_generated_dashboard(generated):
    configmap = render_configmap(dashboard_values(namespace="monitoring", folder="ML",
                                                  labels={"team": "ml"}, annotations={"owner": "x"}))
    kubernetes_validate.validate(configmap, "1.37.0", strict=True)
    assert json.loads(configmap["data"]["saintpipe.json"]) == generated
    assert dashboard_schema_problems(json.loads(configmap["data"]["saintpipe.json"])) == []


def test_no_configmap_when_disabled():
    assert render_configmap(dashboard_values(enabled=False)) is None
