"""Prometheus gauges mirroring a pool's ``stats()``, listed on docs/reference/metric-list.md.

The pool itself runs inside samplers and trainers and exports nothing; the
process that supervises a job (the sampler service) calls ``PoolMetrics.update``
on a timer.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from saintpipe.services.pool.pool import PoolStats

# Metric name -> (PoolStats attribute, help text).
_GAUGES = {
    "saintpipe_pool_depth": ("depth", "Subgraphs waiting in the pool for a trainer"),
    "saintpipe_pool_pending": ("pending", "Subgraphs delivered to a trainer and not yet acknowledged"),
    "saintpipe_pool_produced_total": (
        "produced",
        "Subgraphs ever put into the pool (mirrors the pool's counter)",
    ),
    "saintpipe_pool_acknowledged_total": (
        "acknowledged",
        "Subgraphs acknowledged by trainers (mirrors the pool's counter)",
    ),
    "saintpipe_pool_redelivered_total": (
        "redelivered",
        (
            "Subgraphs taken back from a trainer that held them past the "
            "visibility timeout (mirrors the pool's counter)"
        ),
    ),
    "saintpipe_pool_dead_lettered_total": (
        "dead_lettered",
        (
            "Subgraphs moved to the dead-letter stream instead of being trained on: undecodable, bytes "
            "gone, or delivered too often (mirrors the pool's counter)"
        ),
    ),
}


class PoolMetrics:
    """The pool gauges of one registry, labelled by ``job``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        kwargs: dict[str, Any] = {} if registry is None else {"registry": registry}
        self._gauges = {name: Gauge(name, doc, ["job"], **kwargs) for name, (_, doc) in _GAUGES.items()}

    def update(self, job_id: str, stats: PoolStats) -> None:
        """Set every gauge of ``job_id`` from a stats snapshot."""
        for name, (attr, _) in _GAUGES.items():
            self._gauges[name].labels(job=job_id).set(getattr(stats, attr))
