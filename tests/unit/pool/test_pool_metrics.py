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
        PoolStats(depth=3, pending=2, produced=10, acknowledged=5, redelivered=1, malformed=0, capacity=8),
    )
    expected = {
        "saintpipe_pool_depth": 3,
        "saintpipe_pool_pending": 2,
        "saintpipe_pool_produced_total": 10,
        "saintpipe_pool_acknowledged_total": 5,
        "saintpipe_pool_redelivered_total": 1,
    }
    documented = DOC.read_text()
    for name, value in expected.items():
        assert registry.get_sample_value(name, {"job": "job-a"}) == value
        assert f"`{name}`" in documented
