"""The metric contract (the metric list, docs/reference/metric-list.md) and how a PromQL expression may use it.

The list is the page the documentation site generates from the metric objects and collectors in the code
(docs/hooks/reference.py), so the contract is what the services export. Shared by the dashboard and
alert-rule tests: both read only listed metrics, a histogram only through its _bucket/_sum/_count series, a
counter only through rate()/increase().
"""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "saintpipe.json"
METRIC_LIST = "docs/reference/metric-list.md"


@cache
def metric_list_page() -> str:
    """The Markdown of docs/reference/metric-list.md, generated as the site build generates it."""
    spec = importlib.util.spec_from_file_location("saintpipe_docs_reference",
                                                  ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    return reference.metrics_page(reference.metric_sources())


def documented_metrics() -> dict[str, str]:
    """{name: type} from the tables of the metric list."""
    rows = re.findall(r"^\| `(saintpipe_[a-z0-9_]+)` \| ([^|]+?) \|", metric_list_page(), flags=re.MULTILINE)
    assert len(rows) >= 20, f"could not read the metric tables of {METRIC_LIST}"
    return {name: kind.split()[0] for name, kind in rows}


def documented_labels() -> dict[str, list[str]]:
    """{name: its labels} from the tables of the metric list."""
    rows = re.findall(r"^\| `(saintpipe_[a-z0-9_]+)` \| [^|]+? \| ([^|]*?) \|", metric_list_page(), flags=re.MULTILINE)
    return {name: re.findall(r"`([a-z_]+)`", labels) for name, labels in rows}


def metric_use_problems(where: str, expr: str, documented: dict[str, str]) -> list[str]:
    """What is wrong with how ``expr`` reads saintpipe metrics (empty: nothing)."""
    problems = []
    for name in sorted(set(re.findall(r"\bsaintpipe_[a-z0-9_]+", expr))):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if base != name:
            if documented.get(base) != "histogram":
                problems.append(f"{where}: {name} is not a histogram's series")
        elif name not in documented:
            problems.append(f"{where}: {name} is not on the metric list ({METRIC_LIST})")
        elif documented[name] == "histogram":
            problems.append(f"{where}: query {name}_bucket/_sum/_count, not {name}")
        # Counters, and a histogram's series (counters too), only make sense as rates (of the series a label
        # selector picks, if any).
        if (documented.get(base) == "counter" or base != name) and not re.search(rf"(rate|increase)\({name}(\{{[^}}]*\}})?\[", expr):
            problems.append(f"{where}: {name} only grows: read it with rate()/increase()")
    return problems
