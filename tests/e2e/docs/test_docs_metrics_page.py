"""The metric list is read from the metric objects and collectors: every metric the services export is on it,
in the tables the deployment tests read as the metric contract (tests/support/metrics_contract.py), and a
metric added to the code is on it at the next build."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter

from tests.support.metrics_contract import documented_metrics

ROOT = Path(__file__).resolve().parents[3]


def test_a_metric_with_its_type_labels_and_help(reference) -> None:
    page = reference.metrics_page(reference.metric_sources())
    assert "| `saintpipe_trainer_steps_total` | counter | `trainer`, `trial` | Optimizer steps taken |" in page
    assert "| `saintpipe_sampler_sample_seconds` | histogram | `worker` | Seconds to draw and induce one " in page
    assert "| `saintpipe_feature_errors_total` | counter | `shard`, `code` |" in page
    assert "| `saintpipe_pool_depth` | gauge | `job`, `group` |" in page


def test_the_contract_the_deployment_tests_read_is_the_whole_list(reference) -> None:
    generated = {m.name: m.type for source in reference.metric_sources().values()
                 for m in reference.metric_docs(source)}
    assert generated == documented_metrics()


def test_every_module_that_defines_metrics_is_a_source(reference) -> None:
    modules = set()
    for folder, package in (("saintpipe", "saintpipe"), ("services", "saintpipe.services"),
                            ("trainer", "saintpipe.trainer")):
        for path in (ROOT / folder).rglob("*.py"):
            if re.search(r"^\s*(from|import) prometheus_client\b", path.read_text(), re.MULTILINE):
                parts = path.relative_to(ROOT / folder).with_suffix("").parts
                modules.add(".".join((package, *parts)))
    assert modules == set(reference.metric_sources())


def test_a_metric_added_to_the_code_is_on_the_page(reference, monkeypatch) -> None:
    from saintpipe.trainer import metrics

    widgets = Counter("saintpipe_trainer_widgets", "Widgets <made>", ["trainer", "kind"], registry=CollectorRegistry())
    monkeypatch.setattr(metrics, "WIDGETS", widgets, raising=False)
    page = reference.pages()["reference/metric-list.md"]
    assert "| `saintpipe_trainer_widgets_total` | counter | `trainer`, `kind` | Widgets &lt;made&gt; |" in page
