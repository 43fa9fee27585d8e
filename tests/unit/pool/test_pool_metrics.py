"""The pool's Prometheus gauges carry the names of the metric list and the values of stats(), one series per
consumer group (a sweep's trials), the default group's without a group of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from saintpipe.services.pool.keys import GROUP
from saintpipe.services.pool.metrics import PoolMetrics
from saintpipe.services.pool.pool import PoolStats
from tests.support.metrics_contract import documented_metrics


def stats(depth: int, pending: int = 0, produced: int = 10, acknowledged: int = 0, dead_lettered: int = 0):
    return PoolStats(depth=depth, pending=pending, produced=produced, acknowledged=acknowledged, redelivered=0,
                     dead_lettered=dead_lettered, capacity=8)


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
        assert registry.get_sample_value(name, {"job": "job-a", "group": ""}) == value
        assert documented[name] == "gauge"


def test_dead_lettered_entries_have_a_gauge():
    registry = CollectorRegistry()
    PoolMetrics(registry).update(
        "job-b",
        PoolStats(depth=0, pending=0, produced=7, acknowledged=5, redelivered=3, dead_lettered=2, capacity=8),
    )
    assert registry.get_sample_value("saintpipe_pool_dead_lettered_total", {"job": "job-b", "group": ""}) == 2


def test_the_default_group_has_an_empty_group_label_so_a_plain_runs_series_keep_their_identity():
    registry = CollectorRegistry()
    PoolMetrics(registry).update_groups("plain", {GROUP: stats(4)})
    assert registry.get_sample_value("saintpipe_pool_depth", {"job": "plain", "group": ""}) == 4
    assert registry.get_sample_value("saintpipe_pool_depth", {"job": "plain", "group": GROUP}) is None
    # Prometheus reads an empty label as no label: the series is saintpipe_pool_depth{job="plain"} as before
    assert 'saintpipe_pool_depth{group="",job="plain"} 4.0' in generate_latest(registry).decode()


def test_each_group_has_its_own_series_and_a_removed_groups_series_go():
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    metrics.update_groups("sweep", {"trial-000": stats(5, pending=1, acknowledged=4),
                                     "trial-001": stats(0, pending=2, acknowledged=8)})
    metrics.update_groups("other", {GROUP: stats(1)})

    def depth(job: str, group: str) -> float | None:
        return registry.get_sample_value("saintpipe_pool_depth", {"job": job, "group": group})

    assert (depth("sweep", "trial-000"), depth("sweep", "trial-001")) == (5, 0)
    assert registry.get_sample_value("saintpipe_pool_acknowledged_total", {"job": "sweep", "group": "trial-001"}) == 8
    # trial-000 ended: its group was removed and trial-002's added
    metrics.update_groups("sweep", {"trial-001": stats(1), "trial-002": stats(3)})
    assert depth("sweep", "trial-000") is None
    for name in ("saintpipe_pool_pending", "saintpipe_pool_produced_total", "saintpipe_pool_dead_lettered_total"):
        assert registry.get_sample_value(name, {"job": "sweep", "group": "trial-000"}) is None
    assert (depth("sweep", "trial-001"), depth("sweep", "trial-002")) == (1, 3)
    assert depth("other", "") == 1  # another job's series are its own
