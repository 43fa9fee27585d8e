"""The alert-rule reference is read from deploy/prometheus/alerts.yml: every rule is on it with its wait,
severity, summary and expression, and a rule added to the file is on it at the next build."""

from __future__ import annotations

from pathlib import Path

import yaml

RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "alerts.yml"


def test_every_rule_is_on_the_page(reference) -> None:
    page = reference.pages()["reference/alert-rules.md"]
    names = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]
    assert len(names) >= 4
    assert all(f"## {name}\n" in page for name in names)
    assert "| `saintpipe` | `10m` | `warning` |" in page
    assert "```promql\nmax by (job, trial) (" in page


def test_a_rule_added_to_the_file_is_on_the_page(reference) -> None:
    rules = yaml.safe_load(RULES.read_text())
    rules["groups"][0]["rules"].append({
        "alert": "SaintpipeWidgetsJammed", "expr": "rate(saintpipe_trainer_widgets_total[5m]) == 0", "for": "3m",
        "labels": {"severity": "critical", "team": "widgets"},
        "annotations": {"summary": "widgets | jammed", "description": "see [the runbook]"}})
    page = reference.alerts_page(yaml.safe_dump(rules))
    section = page[page.index("## SaintpipeWidgetsJammed"):]
    assert "| `saintpipe` | `3m` | `critical` | `team=widgets` |" in section
    assert "**Summary:** widgets \\| jammed" in section and "**Description:** see \\[the runbook\\]" in section
    assert "```promql\nrate(saintpipe_trainer_widgets_total[5m]) == 0\n```" in section
