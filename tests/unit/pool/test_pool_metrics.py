"""The pool's Prometheus gauges carry the names of the metric list and the values of stats()."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from saintpipe.services.pool.metrics import PoolMetrics
from saintpipe.services.pool.pool import PoolStats
from tests.support.metrics_contract import documented_metrics


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
    documented = documented_metrics()
    for name, value in expected.items():
        assert registry.get_sample_value(name, {"job": "job-a"}) == value
        assert documented[name] == "gauge"


def test_dead_lettered_entries_have_a_gauge():
    registry = CollectorRegistry()
    PoolMetrics(registry).update(
        "job-b",
        PoolStats(depth=0, pending=0, produced=7, acknowledged=5, redelivered=3, dead_lettered=2, capacity=8),
    )
    assert registry.get_sample_value("saintpipe_pool_dead_lettered_total", {"job": "job-b"}) == 2
