"""The metric contract (the table in docs/metrics.md) and how a PromQL expression may use it.

Shared by the dashboard and alert-rule tests: both read only documented metrics, a
histogram only through its _bucket/_sum/_count series, a counter only through rate()/increase().
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "saintpipe.json"
METRICS_DOC = ROOT / "docs" / "metrics.md"


def documented_metrics() -> dict[str, str]:
    """{name: type} from the table in docs/metrics.md."""
    rows = re.findall(r"^\| `(saintpipe_[a-z0-9_]+)` \| ([^|]+?) \|", METRICS_DOC.read_text(), flags=re.MULTILINE)
    assert len(rows) >= 20, "could not read the metrics table of docs/metrics.md"
    return {name: kind.split()[0] for name, kind in rows}


def metric_use_problems(where: str, expr: str, documented: dict[str, str]) -> list[str]:
    """What is wrong with how ``expr`` reads saintpipe metrics (empty: nothing)."""
    problems = []
    for name in sorted(set(re.findall(r"\bsaintpipe_[a-z0-9_]+", expr))):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if base != name:
            if documented.get(base) != "histogram":
                problems.append(f"{where}: {name} is not a histogram's series")
        elif name not in documented:
            problems.append(f"{where}: {name} is not in docs/metrics.md")
        elif documented[name] == "histogram":
            problems.append(f"{where}: query {name}_bucket/_sum/_count, not {name}")
        # Counters, and a histogram's series (counters too), only make sense as rates.
        if (documented.get(base) == "counter" or base != name) and not re.search(rf"(rate|increase)\({name}\[", expr):
            problems.append(f"{where}: {name} only grows: read it with rate()/increase()")
    return problems
