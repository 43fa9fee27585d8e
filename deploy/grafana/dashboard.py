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


def timeseries_panel(panel_id: int, title: str, description: str, pos: model.GridPos,
                     targets: list[prometheus.Dataquery], unit: str,
                     fraction: bool = False) -> timeseries.Panel:
    """A line chart; ``fraction``: the axis is pinned to 0..1."""
    panel = (timeseries.Panel()
             .id(panel_id)
             .title(title)
             .description(description)
             .datasource(datasource())
             .grid_pos(pos)
             .targets(targets)
             .unit(unit)
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
    if fraction:
        panel.min(0).max(1)
    return panel


def stat_panel(panel_id: int, title: str, description: str, pos: model.GridPos,
               target: prometheus.Dataquery, unit: str, fraction: bool = False,
               thresholds: list[tuple[str, float | None]] | None = None) -> stat.Panel:
    """A big number: the last non-null value; ``thresholds``: (color, from value) steps."""
    panel = (stat.Panel()
             .id(panel_id)
             .title(title)
             .description(description)
             .datasource(datasource())
             .grid_pos(pos)
             .with_target(target)
             .unit(unit)
             .reduce_options(common_builder.ReduceDataOptions()
                             .calcs(["lastNotNull"])
                             .fields("")
                             .values(False))
             .color_mode(common.BigValueColorMode.VALUE)
             .graph_mode(common.BigValueGraphMode.AREA)
             .text_mode(common.BigValueTextMode.AUTO)
             .orientation(common.VizOrientation.AUTO))
    if fraction:
        panel.min(0).max(1)
    if thresholds is not None:
        panel.thresholds(dashboard_builder.ThresholdsConfig()
                         .mode(model.ThresholdsMode.ABSOLUTE)
                         .steps([model.Threshold(color=color, value=value) for color, value in thresholds]))
    return panel


def row(panel_id: int, title: str, y: int) -> dashboard_builder.Row:
    return dashboard_builder.Row(title).id(panel_id).grid_pos(grid(0, y, 24, h=1))


# PromQL used by more than one panel.
SUBGRAPHS_PER_S = "sum(rate(saintpipe_sampler_subgraphs_total[1m]))"
DATA_WAIT_SHARE = ("sum(rate(saintpipe_trainer_data_wait_seconds_total[1m])) / "
                   "(sum(rate(saintpipe_trainer_data_wait_seconds_total[1m])) + "
                   "sum(rate(saintpipe_trainer_step_seconds_sum[1m])))")


TRAIN_HITS = "rate(saintpipe_trainer_feature_cache_hits_total[1m])"
TRAIN_ROWS = "rate(saintpipe_trainer_feature_rows_total[1m])"
TRAIN_BYTES = "rate(saintpipe_trainer_feature_bytes_total[1m])"


def quantile(q: str, histogram: str, by: str = "le") -> str:
    return f"histogram_quantile({q}, sum by ({by}) (rate({histogram}_bucket[1m])))"


def samplers() -> list:
    return [
        row(1, "Samplers", 0),
        stat_panel(
            2, "Subgraphs/s (all workers)",
            "Subgraphs sampled per second by every sampler worker together.",
            grid(0, 1, 4), query("A", SUBGRAPHS_PER_S, "total"), units.Short),
        timeseries_panel(
            3, "Sampler throughput per worker",
            "Subgraphs per second by each sampler worker (one Ray actor pinned to one core), "
            "and their total.",
            grid(4, 1, 10),
            [query("A", "sum by (worker) (rate(saintpipe_sampler_subgraphs_total[1m]))", "worker {{worker}}"),
             query("B", SUBGRAPHS_PER_S, "total")],
            units.Short),
        timeseries_panel(
            4, "Nodes and edges sampled/s",
            "Induced subgraph nodes and edges produced per second, all workers.",
            grid(14, 1, 10),
            [query("A", "sum(rate(saintpipe_sampler_nodes_total[1m]))", "nodes/s"),
             query("B", "sum(rate(saintpipe_sampler_edges_total[1m]))", "edges/s")],
            units.Short),
        timeseries_panel(
            5, "Sample time p50 / p99",
            "Time to draw and induce one subgraph (all workers).",
            grid(0, 9, 8),
            [query("A", quantile("0.5", "saintpipe_sampler_sample_seconds"), "p50"),
             query("B", quantile("0.99", "saintpipe_sampler_sample_seconds"), "p99")],
            units.Seconds),
        timeseries_panel(
            6, "Share of time samplers waited on a full pool",
            "Seconds per second each worker was blocked because the pool was full: near 1 means the "
            "trainers are the bottleneck, so fewer sampler workers would do.",
            grid(8, 9, 8),
            [query("A", "sum by (worker) (rate(saintpipe_sampler_pool_wait_seconds_total[1m]))",
                   "worker {{worker}}")],
            units.PercentUnit, fraction=True),
        timeseries_panel(
            7, "Sampler restarts",
            "Sampler actors restarted in the last 5 minutes (the series appears with the first restart).",
            grid(16, 9, 8),
            [query("A", "sum by (worker) (increase(saintpipe_sampler_restarts_total[5m])) or on() vector(0)",
                   "worker {{worker}}")],
            units.Short),
    ]


def pool() -> list:
    return [
        row(8, "Subgraph pool", 17),
        timeseries_panel(
            9, "Pool depth and pending",
            "Depth: subgraphs waiting in the pool (Redis stream) for a trainer. Pending: delivered to a "
            "trainer, not acknowledged yet.",
            grid(0, 18, 8),
            [query("A", "sum by (job) (saintpipe_pool_depth)", "depth {{job}}"),
             query("B", "sum by (job) (saintpipe_pool_pending)", "pending {{job}}")],
            units.Short),
        timeseries_panel(
            10, "Produced and acknowledged/s",
            "Subgraphs pushed into the pool and acknowledged after a training step, per second.",
            grid(8, 18, 8),
            [query("A", "sum by (job) (rate(saintpipe_pool_produced_total[1m]))", "produced {{job}}"),
             query("B", "sum by (job) (rate(saintpipe_pool_acknowledged_total[1m]))",
                   "acknowledged {{job}}")],
            units.Short),
        timeseries_panel(
            11, "Redeliveries and dead letters",
            "Subgraphs reclaimed from a dead or stalled trainer and delivered again (last 5 minutes), the "
            "running total, and subgraphs moved to the dead-letter stream (undecodable, bytes lost, or "
            "delivered too often: docs/how-to/faults.md).",
            grid(16, 18, 8),
            [query("A", "sum by (job) (increase(saintpipe_pool_redelivered_total[5m]))", "last 5m {{job}}"),
             query("B", "sum by (job) (saintpipe_pool_redelivered_total)", "total {{job}}"),
             query("C", "sum by (job) (saintpipe_pool_dead_lettered_total)", "dead-lettered {{job}}")],
            units.Short),
    ]


def feature_shards() -> list:
    hits = "rate(saintpipe_feature_cache_hits_total[1m])"
    misses = "rate(saintpipe_feature_cache_misses_total[1m])"
    return [
        row(12, "Feature shards", 26),
        timeseries_panel(
            13, "Feature gather latency p50 / p99",
            "Server-side time of one gather on the feature shards, all shards and per shard (p99).",
            grid(0, 27, 8),
            [query("A", quantile("0.5", "saintpipe_feature_request_seconds"), "p50"),
             query("B", quantile("0.99", "saintpipe_feature_request_seconds"), "p99"),
             query("C", quantile("0.99", "saintpipe_feature_request_seconds", by="le, shard"),
                   "p99 shard {{shard}}")],
            units.Seconds),
        timeseries_panel(
            14, "Feature bytes/s",
            "Feature bytes served per second by each shard, and in total.",
            grid(8, 27, 8),
            [query("A", "sum by (shard) (rate(saintpipe_feature_bytes_total[1m]))", "shard {{shard}}"),
             query("B", "sum(rate(saintpipe_feature_bytes_total[1m]))", "total")],
            units.BytesPerSecondSI),
        timeseries_panel(
            15, "Feature requests and rows/s",
            "Gather requests and feature rows served per second, all shards.",
            grid(16, 27, 8),
            [query("A", "sum(rate(saintpipe_feature_requests_total[1m]))", "requests/s"),
             query("B", "sum(rate(saintpipe_feature_rows_total[1m]))", "rows/s")],
            units.Short),
        timeseries_panel(
            16, "Feature cache hit rate",
            "Share of feature rows the trainers' client cache answered without asking a shard.",
            grid(0, 35, 12),
            [query("A", f"sum({hits}) / (sum({hits}) + sum({misses}))", "all trainers"),
             query("B", f"sum by (trainer) ({hits}) / "
                        f"(sum by (trainer) ({hits}) + sum by (trainer) ({misses}))",
                   "trainer {{trainer}}")],
            units.PercentUnit, fraction=True),
        timeseries_panel(
            17, "Feature errors/s",
            "Failed gathers per second by shard and gRPC status code (the series appears with the "
            "first error).",
            grid(12, 35, 12),
            [query("A", "sum by (shard, code) (rate(saintpipe_feature_errors_total[1m])) or on() vector(0)",
                   "shard {{shard}} {{code}}")],
            units.Short),
    ]


def trainers() -> list:
    wait = "rate(saintpipe_trainer_data_wait_seconds_total[1m])"
    step = "rate(saintpipe_trainer_step_seconds_sum[1m])"
    return [
        row(18, "Trainers", 43),
        stat_panel(
            19, "Time waiting for data",
            "Share of trainer time spent waiting for a subgraph and its features (the rest is compute). "
            "High: add sampler workers or feature shards.",
            grid(0, 44, 4), query("A", DATA_WAIT_SHARE, "all trainers"), units.PercentUnit, fraction=True,
            thresholds=[("green", None), ("orange", 0.2), ("red", 0.5)]),
        timeseries_panel(
            20, "Share of time trainers waited for data",
            "Per trainer: data wait / (data wait + step compute).",
            grid(4, 44, 10),
            [query("A", DATA_WAIT_SHARE, "all trainers"),
             query("B", f"sum by (trainer) ({wait}) / "
                        f"(sum by (trainer) ({wait}) + sum by (trainer) ({step}))",
                   "trainer {{trainer}}")],
            units.PercentUnit, fraction=True),
        timeseries_panel(
            21, "Trainer step time",
            "Compute time of one step (forward, backward, optimizer): mean per trainer and p99 over all.",
            grid(14, 44, 10),
            [query("A", "sum by (trainer) (rate(saintpipe_trainer_step_seconds_sum[1m])) / "
                        "sum by (trainer) (rate(saintpipe_trainer_step_seconds_count[1m]))",
                   "mean trainer {{trainer}}"),
             query("B", quantile("0.99", "saintpipe_trainer_step_seconds"), "p99")],
            units.Seconds),
        timeseries_panel(
            22, "Steps/s and feature fetch time",
            "Training steps per second, and seconds per second spent fetching features, per trainer.",
            grid(0, 52, 8),
            [query("A", "sum by (trainer) (rate(saintpipe_trainer_steps_total[1m]))", "steps/s {{trainer}}"),
             query("B", "sum by (trainer) (rate(saintpipe_trainer_fetch_seconds_total[1m]))",
                   "fetch s/s {{trainer}}")],
            units.Short),
        timeseries_panel(
            23, "Training loss",
            "Last training loss reported by each trainer.",
            grid(8, 52, 8),
            [query("A", "saintpipe_trainer_loss", "trainer {{trainer}}")],
            units.Short),
        timeseries_panel(
            24, "Validation score",
            "Last validation accuracy / F1-micro reported by each trainer.",
            grid(16, 52, 8),
            [query("A", "saintpipe_trainer_val_score", "trainer {{trainer}}")],
            units.PercentUnit, fraction=True),
        timeseries_panel(
            25, "Training steps: feature cache hit rate",
            "Share of the feature rows the training steps requested that the trainer's cache served "
            "(evaluation's gathers excluded; what `saintpipe run` reports). Dependent minibatches "
            "(sampler kappa > 1) raise it: docs/explanation/sampler.md.",
            grid(0, 60, 12),
            [query("A", f"sum({TRAIN_HITS}) / sum({TRAIN_ROWS})", "all trainers"),
             query("B", f"sum by (trainer) ({TRAIN_HITS}) / sum by (trainer) ({TRAIN_ROWS})",
                   "trainer {{trainer}}")],
            units.PercentUnit, fraction=True),
        timeseries_panel(
            26, "Training steps: feature bytes fetched per step",
            "Feature bytes fetched from the shards (gRPC or shared memory) per training step: the cache's "
            "misses, per trainer.",
            grid(12, 60, 12),
            [query("A", f"sum by (trainer) ({TRAIN_BYTES}) / "
                        "sum by (trainer) (rate(saintpipe_trainer_steps_total[1m]))", "trainer {{trainer}}")],
            units.BytesSI),
    ]


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
                              .multi(False)))
    # Rows are not collapsed: their panels follow them on the dashboard's top level.
    for item in samplers() + pool() + feature_shards() + trainers():
        if isinstance(item, dashboard_builder.Row):
            builder.with_row(item)
        else:
            builder.with_panel(item)
    dashboard = builder.build()
    # Fields the SDK's model has but its builders do not set.
    dashboard.schema_version = SCHEMA_VERSION
    for variable in dashboard.templating.list_val or []:
        variable.refresh = model.VariableRefresh.ON_DASHBOARD_LOAD
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
