"""How every ``saintpipe bench`` command prints its figures, and counts in messages.

A readable table by default; with ``--json`` one JSON object holding the same
figures (``{"benchmark": ..., "params": {...}, "rows": [...], "summary": {...}}``).
:func:`plural` writes "1 worker" / "2 workers" for every message that shows a count.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Mapping, Sequence, TextIO


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object with the figures instead of a table")


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless count is 1: "1 worker", "1,024 workers".

    Args:
        count: how many. noun: the singular. plural_form: the plural where adding "s" is wrong ("retries").

    Example:
        >>> plural(1, "worker"), plural(3, "retry", "retries")
        ('1 worker', '3 retries')
    """
    return f"{count:,} {noun if count == 1 else plural_form or noun + 's'}"


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    if isinstance(value, (list, tuple)):  # a range such as [min, max] of a paired ratio
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Render rows of dicts as an aligned text table."""
    if not rows:
        return "(no rows)"
    columns = list(columns or dict.fromkeys(k for row in rows for k in row))
    cells = [[_fmt(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    rule = "  ".join("-" * w for w in widths)
    body = [
        "  ".join(cell.rjust(w) if _is_num(cell) else cell.ljust(w) for cell, w in zip(r, widths)) for r in cells
    ]
    return "\n".join([line, rule, *body])


def _is_num(cell: str) -> bool:
    return cell.replace(",", "").replace(".", "", 1).replace("e", "").replace("-", "").replace("+", "").isdigit()


def emit_report(
    benchmark: str, rows: Sequence[Mapping[str, Any]], *, params: Mapping[str, Any] | None = None,
    summary: Mapping[str, Any] | None = None, as_json: bool = False, columns: Sequence[str] | None = None,
    out: TextIO | None = None,
) -> None:
    """Print a benchmark's figures as a table, or as one JSON object with ``as_json``."""
    out = out or sys.stdout
    if as_json:
        payload = {"benchmark": benchmark, "params": dict(params or {}), "rows": [dict(r) for r in rows],
                   "summary": dict(summary or {})}
        out.write(json.dumps(payload, default=float) + "\n")
        return
    out.write(f"== {benchmark} ==\n")
    if params:
        out.write("params: " + ", ".join(f"{k}={v}" for k, v in params.items()) + "\n")
    out.write(format_table(rows, columns) + "\n")
    if summary:
        width = max(len(k) for k in summary)
        for key, value in summary.items():
            out.write(f"{key.ljust(width)}  {_fmt(value)}\n")
    out.flush()
