"""The saintpipe Grafana dashboard, built with Grafana's Foundation SDK.

This file is the source of the dashboard; the JSON is generated from it:

    python deploy/grafana/dashboard.py          # write both copies
    python deploy/grafana/dashboard.py --check  # exit 1 if a committed copy differs

It writes deploy/grafana/dashboards/saintpipe.json (compose's Grafana provisions
it) and helm/saintpipe/dashboards/saintpipe.json (the chart's ConfigMap for
Grafana's dashboard sidecar). tests/unit/deploy/test_deploy_dashboard_schema.py
fails when either copy differs from build() or when the JSON does not fit
Grafana's schema; metric names are those of docs/reference/metric-list.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import common as common_builder
from grafana_foundation_sdk.builders import dashboard as dashboard_builder
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, units
from grafana_foundation_sdk.models import dashboard as model

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = (
    ROOT / "deploy" / "grafana" / "dashboards" / "saintpipe.json",
    ROOT / "helm" / "saintpipe" / "dashboards" / "saintpipe.json",
)

UID = "saintpipe"
TITLE = "saintpipe"
DESCRIPTION = ("GraphSAINT pipeline: sampler throughput, subgraph pool, feature shards and trainers. "
               "Metric names: docs/reference/metric-list.md.")
# The dashboard JSON schema version the panels are written in (Grafana migrates
# older ones on load). The SDK's builders have no setter for it and default to 36.
SCHEMA_VERSION = 39
# Every panel and query uses the Prometheus datasource picked by this variable
# (the default one: deploy/grafana/provisioning/datasources/prometheus.yml).
DATASOURCE_VARIABLE = "datasource"
DATASOURCE_TYPE = "prometheus"
# The trials of a sweep (docs/how-to/sweeps.md): the `trial` label of the trainer metrics, which is also the
# pool's consumer `group` of the trial. A plain run's series have neither label (empty): "All" is `.*`, which
# matches them too, where Grafana's own "All" would list only the values found.
TRIAL_VARIABLE = "trial"
TRIAL = 'trial=~"$trial"'
GROUP = 'group=~"$trial"'


def datasource() -> model.DataSourceRef:
    return model.DataSourceRef(type_val=DATASOURCE_TYPE, uid="${" + DATASOURCE_VARIABLE + "}")


def grid(x: int, y: int, w: int, h: int = 8) -> model.GridPos:
    return model.GridPos(x=x, y=y, w=w, h=h)


def query(ref_id: str, expr: str, legend: str) -> prometheus.Dataquery:
    """A range query of the panel's Prometheus datasource."""
    return (prometheus.Dataquery()
            .datasource(datasource())
            .ref_id(ref_id)
            .expr(expr)
            .legend_format(legend)
            .range())


@dataclass(frozen=True)
class Panel:
    """One panel as :data:`SECTIONS` declares it; :func:`panels` gives it its id and its place."""

    width: int
    title: str
    description: str
    queries: list[tuple[str, str]]  # (PromQL, legend); their ref ids are A, B, C, ... in this order
    unit: str
    fraction: bool = False  # the axis is pinned to 0..1
    stat: bool = False  # a big number (the last non-null value) instead of a line chart
    thresholds: list[tuple[str, float | None]] | None = None  # a stat panel's (color, from value) steps


def build_panel(panel_id: int, spec: Panel, pos: model.GridPos) -> timeseries.Panel | stat.Panel:
    """The SDK's panel of ``spec`` at ``pos``."""
    targets = [query(chr(ord("A") + i), expr, legend) for i, (expr, legend) in enumerate(spec.queries)]
    panel = stat.Panel() if spec.stat else timeseries.Panel()
    panel.id(panel_id).title(spec.title).description(spec.description).datasource(datasource()).grid_pos(pos)
    if spec.stat:
        (panel.with_target(targets[0])
         .unit(spec.unit)
         .reduce_options(common_builder.ReduceDataOptions()
                         .calcs(["lastNotNull"])
                         .fields("")
                         .values(False))
         .color_mode(common.BigValueColorMode.VALUE)
         .graph_mode(common.BigValueGraphMode.AREA)
         .text_mode(common.BigValueTextMode.AUTO)
         .orientation(common.VizOrientation.AUTO))
    else:
        (panel.targets(targets)
         .unit(spec.unit)
         .draw_style(common.GraphDrawStyle.LINE)
         .line_width(1)
         .fill_opacity(10)
         .show_points(common.VisibilityMode.NEVER)
         .span_nulls(True)
         .legend(common_builder.VizLegendOptions()
                 .display_mode(common.LegendDisplayMode.LIST)
                 .placement(common.LegendPlacement.BOTTOM)
                 .show_legend(True))
         .tooltip(common_builder.VizTooltipOptions()
                  .mode(common.TooltipDisplayMode.MULTI)
                  .sort(common.SortOrder.DESCENDING)))
    if spec.fraction:
        panel.min(0).max(1)
    if spec.thresholds is not None:
        panel.thresholds(dashboard_builder.ThresholdsConfig()
                         .mode(model.ThresholdsMode.ABSOLUTE)
                         .steps([model.Threshold(color=color, value=value) for color, value in spec.thresholds]))
    return panel


# PromQL used by more than one panel, or too long to read inline. Trainer series are those of the trials
# picked ($trial); "by (trainer, trial)" keeps a sweep's trials apart (they share the trainer's name).
SUBGRAPHS_PER_S = "sum(rate(saintpipe_sampler_subgraphs_total[1m]))"
WAIT = f"rate(saintpipe_trainer_data_wait_seconds_total{{{TRIAL}}}[1m])"
STEP = f"rate(saintpipe_trainer_step_seconds_sum{{{TRIAL}}}[1m])"
DATA_WAIT_SHARE = f"sum({WAIT}) / (sum({WAIT}) + sum({STEP}))"
FEATURE_HITS = "rate(saintpipe_feature_cache_hits_total[1m])"
FEATURE_MISSES = "rate(saintpipe_feature_cache_misses_total[1m])"
TRAIN_HITS = f"rate(saintpipe_trainer_feature_cache_hits_total{{{TRIAL}}}[1m])"
TRAIN_ROWS = f"rate(saintpipe_trainer_feature_rows_total{{{TRIAL}}}[1m])"
TRAIN_BYTES = f"rate(saintpipe_trainer_feature_bytes_total{{{TRIAL}}}[1m])"
BY_TRAINER = "by (trainer, trial)"
TRAINER_LEGEND = "{{trainer}} {{trial}}"


def pool(expr: str) -> str:
    """A pool gauge (or its rate) per job and consumer group: one line per trial of a sweep."""
    return f"sum by (job, group) ({expr})"


def quantile(q: str, histogram: str, by: str = "le", selector: str = "") -> str:
    return f"histogram_quantile({q}, sum by ({by}) (rate({histogram}_bucket{selector}[1m])))"


# The dashboard, section by section: a row, then lines of panels (their widths add up to 24).
SECTIONS: list[tuple[str, list[list[Panel]]]] = [
    ("Samplers", [
        [Panel(4, "Subgraphs/s (all workers)",
               "Subgraphs sampled per second by every sampler worker together.",
               [(SUBGRAPHS_PER_S, "total")], units.Short, stat=True),
         Panel(10, "Sampler throughput per worker",
               "Subgraphs per second by each sampler worker (one Ray actor pinned to one core), and their total.",
               [("sum by (worker) (rate(saintpipe_sampler_subgraphs_total[1m]))", "worker {{worker}}"),
                (SUBGRAPHS_PER_S, "total")],
               units.Short),
         Panel(10, "Nodes and edges sampled/s",
               "Induced subgraph nodes and edges produced per second, all workers.",
               [("sum(rate(saintpipe_sampler_nodes_total[1m]))", "nodes/s"),
                ("sum(rate(saintpipe_sampler_edges_total[1m]))", "edges/s")],
               units.Short)],
        [Panel(8, "Sample time p50 / p99",
               "Time to draw and induce one subgraph (all workers).",
               [(quantile("0.5", "saintpipe_sampler_sample_seconds"), "p50"),
                (quantile("0.99", "saintpipe_sampler_sample_seconds"), "p99")],
               units.Seconds),
         Panel(8, "Share of time samplers waited on a full pool",
               "Seconds per second each worker was blocked because the pool was full: near 1 means the "
               "trainers are the bottleneck, so fewer sampler workers would do.",
               [("sum by (worker) (rate(saintpipe_sampler_pool_wait_seconds_total[1m]))", "worker {{worker}}")],
               units.PercentUnit, fraction=True),
         Panel(8, "Sampler restarts",
               "Sampler actors restarted in the last 5 minutes (the series appears with the first restart).",
               [("sum by (worker) (increase(saintpipe_sampler_restarts_total[5m])) or on() vector(0)",
                 "worker {{worker}}")],
               units.Short)],
    ]),
    ("Subgraph pool", [
        [Panel(8, "Pool depth and pending",
               "Depth: subgraphs waiting in the pool (Redis stream) for a trainer. Pending: delivered to a "
               "trainer, not acknowledged yet. Per consumer group: in a sweep each trial reads the one stream "
               "of the one sampler fleet in a group of its own (named after the trial), so each line is a "
               "trial's backlog; a plain run has one line.",
               [(pool(f"saintpipe_pool_depth{{{GROUP}}}"), "depth {{job}} {{group}}"),
                (pool(f"saintpipe_pool_pending{{{GROUP}}}"), "pending {{job}} {{group}}")],
               units.Short),
         Panel(8, "Produced and acknowledged/s",
               "Subgraphs pushed into the pool and acknowledged after a training step, per second, per "
               "consumer group (a sweep's trial): every group is offered what the fleet produces.",
               [(pool(f"rate(saintpipe_pool_produced_total{{{GROUP}}}[1m])"), "produced {{job}} {{group}}"),
                (pool(f"rate(saintpipe_pool_acknowledged_total{{{GROUP}}}[1m])"), "acknowledged {{job}} {{group}}")],
               units.Short),
         Panel(8, "Redeliveries and dead letters",
               "Subgraphs reclaimed from a dead or stalled trainer and delivered again (last 5 minutes), the "
               "running total, and subgraphs moved to the dead-letter stream (undecodable, bytes lost, or "
               "delivered too often: docs/how-to/faults.md), per consumer group.",
               [(pool(f"increase(saintpipe_pool_redelivered_total{{{GROUP}}}[5m])"), "last 5m {{job}} {{group}}"),
                (pool(f"saintpipe_pool_redelivered_total{{{GROUP}}}"), "total {{job}} {{group}}"),
                (pool(f"saintpipe_pool_dead_lettered_total{{{GROUP}}}"), "dead-lettered {{job}} {{group}}")],
               units.Short)],
    ]),
    ("Feature shards", [
        [Panel(8, "Feature gather latency p50 / p99",
               "Server-side time of one gather on the feature shards, all shards and per shard (p99).",
               [(quantile("0.5", "saintpipe_feature_request_seconds"), "p50"),
                (quantile("0.99", "saintpipe_feature_request_seconds"), "p99"),
                (quantile("0.99", "saintpipe_feature_request_seconds", by="le, shard"), "p99 shard {{shard}}")],
               units.Seconds),
         Panel(8, "Feature bytes/s",
               "Feature bytes served per second by each shard, and in total.",
               [("sum by (shard) (rate(saintpipe_feature_bytes_total[1m]))", "shard {{shard}}"),
                ("sum(rate(saintpipe_feature_bytes_total[1m]))", "total")],
               units.BytesPerSecondSI),
         Panel(8, "Feature requests and rows/s",
               "Gather requests and feature rows served per second, all shards.",
               [("sum(rate(saintpipe_feature_requests_total[1m]))", "requests/s"),
                ("sum(rate(saintpipe_feature_rows_total[1m]))", "rows/s")],
               units.Short)],
        [Panel(12, "Feature cache hit rate",
               "Share of feature rows the trainers' client cache answered without asking a shard. Per trainer "
               "and endpoint: the feature client's counters carry no trial, but each trial of a sweep serves "
               "its own endpoint.",
               [(f"sum({FEATURE_HITS}) / (sum({FEATURE_HITS}) + sum({FEATURE_MISSES}))", "all trainers"),
                (f"sum by (trainer, instance) ({FEATURE_HITS}) / (sum by (trainer, instance) ({FEATURE_HITS}) + "
                 f"sum by (trainer, instance) ({FEATURE_MISSES}))", "trainer {{trainer}} {{instance}}")],
               units.PercentUnit, fraction=True),
         Panel(12, "Feature errors/s",
               "Failed gathers per second by shard and gRPC status code (the series appears with the "
               "first error).",
               [("sum by (shard, code) (rate(saintpipe_feature_errors_total[1m])) or on() vector(0)",
                 "shard {{shard}} {{code}}")],
               units.Short)],
    ]),
    ("Trainers", [
        [Panel(4, "Time waiting for data",
               "Share of trainer time spent waiting for a subgraph and its features (the rest is compute). "
               "High: add sampler workers or feature shards.",
               [(DATA_WAIT_SHARE, "all trainers")], units.PercentUnit, fraction=True, stat=True,
               thresholds=[("green", None), ("orange", 0.2), ("red", 0.5)]),
         Panel(10, "Share of time trainers waited for data",
               "Per trainer (and trial, in a sweep): data wait / (data wait + step compute).",
               [(DATA_WAIT_SHARE, "all trainers"),
                (f"sum {BY_TRAINER} ({WAIT}) / (sum {BY_TRAINER} ({WAIT}) + sum {BY_TRAINER} ({STEP}))",
                 TRAINER_LEGEND)],
               units.PercentUnit, fraction=True),
         Panel(10, "Trainer step time",
               "Compute time of one step (forward, backward, optimizer): mean per trainer (and trial) and p99 "
               "over all those picked.",
               [(f"sum {BY_TRAINER} ({STEP}) / "
                 f"sum {BY_TRAINER} (rate(saintpipe_trainer_step_seconds_count{{{TRIAL}}}[1m]))",
                 f"mean {TRAINER_LEGEND}"),
                (quantile("0.99", "saintpipe_trainer_step_seconds", selector=f"{{{TRIAL}}}"), "p99")],
               units.Seconds)],
        [Panel(8, "Steps/s and feature fetch time",
               "Training steps per second, and seconds per second spent fetching features, per trainer (and "
               "trial).",
               [(f"sum {BY_TRAINER} (rate(saintpipe_trainer_steps_total{{{TRIAL}}}[1m]))",
                 f"steps/s {TRAINER_LEGEND}"),
                (f"sum {BY_TRAINER} (rate(saintpipe_trainer_fetch_seconds_total{{{TRIAL}}}[1m]))",
                 f"fetch s/s {TRAINER_LEGEND}")],
               units.Short),
         Panel(8, "Training loss",
               "Last training loss reported by each trainer (each trial of a sweep).",
               [(f"saintpipe_trainer_loss{{{TRIAL}}}", TRAINER_LEGEND)],
               units.Short),
         Panel(8, "Validation score",
               "Last validation accuracy / F1-micro reported by each trainer (each trial of a sweep: the "
               "score ASHA ranks them by).",
               [(f"saintpipe_trainer_val_score{{{TRIAL}}}", TRAINER_LEGEND)],
               units.PercentUnit, fraction=True)],
        [Panel(12, "Training steps: feature cache hit rate",
               "Share of the feature rows the training steps requested that the trainer's cache served "
               "(evaluation's gathers excluded; what `saintpipe run` reports). Dependent minibatches "
               "(sampler kappa > 1) raise it: docs/explanation/sampler.md.",
               [(f"sum({TRAIN_HITS}) / sum({TRAIN_ROWS})", "all trainers"),
                (f"sum {BY_TRAINER} ({TRAIN_HITS}) / sum {BY_TRAINER} ({TRAIN_ROWS})", TRAINER_LEGEND)],
               units.PercentUnit, fraction=True),
         Panel(12, "Training steps: feature bytes fetched per step",
               "Feature bytes fetched from the shards (gRPC or shared memory) per training step: the cache's "
               "misses, per trainer (and trial).",
               [(f"sum {BY_TRAINER} ({TRAIN_BYTES}) / "
                 f"sum {BY_TRAINER} (rate(saintpipe_trainer_steps_total{{{TRIAL}}}[1m]))", TRAINER_LEGEND)],
               units.BytesSI)],
    ]),
]


def panels() -> list:
    """The rows and panels of :data:`SECTIONS` in order, numbered from 1: each row of the grid full width and
    1 high, each line of panels 8 high, below the one before."""
    items: list = []
    y = 0
    for title, lines in SECTIONS:
        items.append(dashboard_builder.Row(title).id(len(items) + 1).grid_pos(grid(0, y, 24, h=1)))
        y += 1
        for line in lines:
            x = 0
            for spec in line:
                items.append(build_panel(len(items) + 1, spec, grid(x, y, spec.width)))
                x += spec.width
            y += 8
    return items


def build_model() -> model.Dashboard:
    """The dashboard as the SDK's model."""
    builder = (dashboard_builder.Dashboard(TITLE)
               .uid(UID)
               .description(DESCRIPTION)
               .tags(["saintpipe"])
               .timezone("browser")
               .editable()
               .tooltip(model.DashboardCursorSync.CROSSHAIR)
               .version(1)
               .refresh("5s")
               .time("now-15m", "now")
               .annotations([])
               .links([])
               .with_variable(dashboard_builder.DatasourceVariable(DATASOURCE_VARIABLE)
                              .label("Prometheus")
                              .type(DATASOURCE_TYPE)
                              .hide(model.VariableHide.DONT_HIDE)
                              .regex("")
                              .include_all(False)
                              .multi(False))
               .with_variable(dashboard_builder.QueryVariable(TRIAL_VARIABLE)
                              .label("Trial")
                              .description("A sweep's trials (the trainer metrics' trial label); a plain run "
                                           "has none: All shows it")
                              .datasource(datasource())
                              .query("label_values(saintpipe_trainer_steps_total, trial)")
                              .regex("")
                              .sort(model.VariableSort.ALPHABETICAL_ASC)
                              .multi(True)
                              .include_all(True)
                              .all_value(".*")
                              .current(model.VariableOption(text="All", value="$__all", selected=True))
                              .hide(model.VariableHide.DONT_HIDE)))
    # Rows are not collapsed: their panels follow them on the dashboard's top level.
    for item in panels():
        if isinstance(item, dashboard_builder.Row):
            builder.with_row(item)
        else:
            builder.with_panel(item)
    dashboard = builder.build()
    # Fields the SDK's model has but its builders do not set.
    dashboard.schema_version = SCHEMA_VERSION
    for variable in dashboard.templating.list_val or []:
        # A sweep's trials come and go: their list is read again with the time range.
        variable.refresh = (model.VariableRefresh.ON_TIME_RANGE_CHANGED if variable.name == TRIAL_VARIABLE
                            else model.VariableRefresh.ON_DASHBOARD_LOAD)
        variable.options = []
    return dashboard


def build() -> dict:
    """The dashboard JSON (as Grafana stores it), from the SDK's builders."""
    return json.loads(json.dumps(build_model(), cls=JSONEncoder))


def render() -> str:
    """The text of the committed JSON files."""
    return json.dumps(build(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each committed JSON file that differs")
    args = parser.parse_args(argv)
    text = render()
    stale = []
    for path in OUTPUTS:
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    for path in stale:
        print(f"{path.relative_to(ROOT)} differs from deploy/grafana/dashboard.py's output: "
              "run python deploy/grafana/dashboard.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
