"""Prometheus gauges mirroring a pool's ``stats()`` per consumer group, listed on docs/reference/metric-list.md.

The pool itself runs inside samplers and trainers and exports nothing; the
process that supervises a job (the sampler service) calls ``PoolMetrics.update_groups``
with ``pool.group_stats()`` on a timer.

Every gauge is labelled by ``job`` and ``group``: a sweep's trials each read the
job's stream in a group of their own (named after the trial), so each trial's
backlog is a series of its own. The job's default group, the only one of a
plain run, is exported with an empty ``group``, which Prometheus drops: a plain
run's series are what they were before the label existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from saintpipe.services.pool.keys import GROUP
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
    """The pool gauges of one registry, labelled by ``job`` and ``group``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        kwargs: dict[str, Any] = {} if registry is None else {"registry": registry}
        self._gauges = {name: Gauge(name, doc, ["job", "group"], **kwargs) for name, (_, doc) in _GAUGES.items()}
        self._exported: dict[str, set[str]] = {}  # job -> the group labels it has series of

    def update(self, job_id: str, stats: PoolStats, group: str = "") -> None:
        """Set every gauge of ``job_id``'s ``group`` (empty: the default group) from a stats snapshot."""
        label = "" if group == GROUP else group
        for name, (attr, _) in _GAUGES.items():
            self._gauges[name].labels(job=job_id, group=label).set(getattr(stats, attr))
        self._exported.setdefault(job_id, set()).add(label)

    def update_groups(self, job_id: str, by_group: Mapping[str, PoolStats]) -> None:
        """Set the gauges of each group of ``by_group`` (``pool.group_stats()``) and drop the series of the
        job's groups that are gone (a removed group's backlog is no longer anyone's)."""
        for group, stats in by_group.items():
            self.update(job_id, stats, group)
        kept = {"" if g == GROUP else g for g in by_group}
        for label in self._exported.get(job_id, set()) - kept:
            for gauge in self._gauges.values():
                gauge.remove(job_id, label)
        self._exported[job_id] = kept
