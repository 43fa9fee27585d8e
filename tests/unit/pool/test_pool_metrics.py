"""The pool's Prometheus gauges carry the names of docs/metrics.md and the values of stats()."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from saintpipe.services.pool.metrics import PoolMetrics
from saintpipe.services.pool.pool import PoolStats

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def test_gauges_mirror_stats_under_the_documented_names():
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    metrics.update(
        "job-a",
        PoolStats(depth=3, pending=2, produced=10, acknowledged=4, redelivered=1, dead_lettered=1, capacity=8),
    )
    expected = {
        "saintpipe_pool_depth": 3,
        "saintpipe_pool_pending": 2,
        "saintpipe_pool_produced_total": 10,
        "saintpipe_pool_acknowledged_total": 4,
        "saintpipe_pool_redelivered_total": 1,
    }
    documented = DOC.read_text()
    for name, value in expected.items():
        assert registry.get_sample_value(name, {"job": "job-a"}) == value
        assert f"`{name}`" in documented


def test_dead_lettered_entries_have_a_gauge():
    # docs/metrics.md (the contract with the dashboard) is not this package's file: its row is added there.
    registry = CollectorRegistry()
    PoolMetrics(registry).update(
        "job-b",
        PoolStats(depth=0, pending=0, produced=7, acknowledged=5, redelivered=3, dead_lettered=2, capacity=8),
    )
    assert registry.get_sample_value("saintpipe_pool_dead_lettered_total", {"job": "job-b"}) == 2
