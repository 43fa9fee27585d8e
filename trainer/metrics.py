"""The trainer's Prometheus metrics (docs/reference/metric-list.md lists them, from here), labelled by trainer
name and trial, and the meter of what the feature gathers of training steps cost (:class:`FeatureMeter`).

``trial`` is the sweep's trial id (``saintpipe sweep``: its trials share one job, so their trainers share a
name) and empty for a plain run or ``serve trainer``: Prometheus drops a label whose value is empty, so a plain
run's series, and the queries and alert rules written for them, are what they were before the label existed.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, fields
from typing import Protocol

import numpy as np
from prometheus_client import Counter, Gauge, Histogram, start_http_server

LABELS = ("trainer", "trial")

STEPS = Counter("saintpipe_trainer_steps", "Optimizer steps taken", LABELS)
STEP_SECONDS = Histogram(
    "saintpipe_trainer_step_seconds",
    "Compute time of one step (forward, backward, all-reduce, optimizer)",
    LABELS,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
DATA_WAIT = Counter(
    "saintpipe_trainer_data_wait_seconds", "Time steps waited for their subgraph and features", LABELS
)
FETCH = Counter("saintpipe_trainer_fetch_seconds", "Time spent fetching features", LABELS)
LOSS = Gauge("saintpipe_trainer_loss", "Last training loss", LABELS)
VAL_SCORE = Gauge("saintpipe_trainer_val_score", "Last validation accuracy / F1-micro", LABELS)
FEATURE_ROWS = Counter(
    "saintpipe_trainer_feature_rows", "Feature rows the training steps requested (evaluation excluded)", LABELS
)
FEATURE_CACHE_HITS = Counter(
    "saintpipe_trainer_feature_cache_hits", "Of those rows, the ones the trainer's feature cache served", LABELS
)
FEATURE_BYTES = Counter(
    "saintpipe_trainer_feature_bytes",
    "Feature bytes fetched from the shards (gRPC or shared memory) for the training steps' cache misses",
    LABELS,
)


class TrainerMetrics:
    """The metric children of one trainer (of ``trial``, a sweep's; empty: none), and its last loss and validation
    score (for progress reports)."""

    last_loss = math.nan
    last_val = math.nan

    def __init__(self, trainer: str, trial: str = "") -> None:
        labels = {"trainer": trainer, "trial": trial}
        self.steps = STEPS.labels(**labels)
        self.step_seconds = STEP_SECONDS.labels(**labels)
        self.data_wait = DATA_WAIT.labels(**labels)
        self.fetch = FETCH.labels(**labels)
        self.loss = LOSS.labels(**labels)
        self.val = VAL_SCORE.labels(**labels)
        self.feature_rows = FEATURE_ROWS.labels(**labels)
        self.feature_hits = FEATURE_CACHE_HITS.labels(**labels)
        self.feature_bytes = FEATURE_BYTES.labels(**labels)

    def observe_step(self, compute_s: float, data_wait_s: float, fetch_s: float, loss: float) -> None:
        self.steps.inc()
        self.step_seconds.observe(compute_s)
        self.data_wait.inc(data_wait_s)
        self.fetch.inc(fetch_s)
        self.loss.set(loss)
        self.last_loss = loss

    def val_score(self, score: float) -> None:
        self.val.set(score)
        self.last_val = score

    def observe_features(self, rows: int, cache_hits: int, fetched_bytes: int) -> None:
        """One training gather: rows requested, of which cache hits, and the bytes fetched for the rest."""
        self.feature_rows.inc(rows)
        self.feature_hits.inc(cache_hits)
        self.feature_bytes.inc(fetched_bytes)


@dataclass
class FeatureTotals:
    """What the feature gathers of training steps cost, summed (``saintpipe run`` reports these).

    Attributes:
        gathers: training gathers, one per subgraph trained on (a prefetched one included).
        rows: feature rows they requested. cache_hits: rows the trainer's feature cache served.
        fetched_bytes: bytes fetched from the feature shards for the others (gRPC or shared memory).
    """

    gathers: int = 0
    rows: int = 0
    cache_hits: int = 0
    fetched_bytes: int = 0

    @property
    def hit_rate(self) -> float:
        """Share of the requested rows the cache served (NaN before any gather)."""
        return self.cache_hits / self.rows if self.rows else float("nan")

    @property
    def bytes_per_gather(self) -> float:
        """Feature bytes fetched per training step (NaN before any gather)."""
        return self.fetched_bytes / self.gathers if self.gathers else float("nan")

    def __add__(self, other: "FeatureTotals") -> "FeatureTotals":
        return FeatureTotals(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


class FeatureSource(Protocol):
    """What :class:`FeatureMeter` wraps: ``FeatureClient``'s ``gather`` and ``stats``."""

    def gather(self, ids: np.ndarray) -> np.ndarray: ...

    def stats(self) -> dict[str, float]: ...


class FeatureMeter:
    """Counts rows, cache hits and bytes fetched of the training steps' feature gathers.

    The client's own counters cover every gather, evaluation's too (which
    reads the whole graph once, through the same cache). The meter tells them
    apart: training gathers go through :meth:`gather`, the others through
    :meth:`gather_uncounted`, and both hold one lock, so the change of the
    client's counters across a counted gather is that gather's alone (the
    prefetch thread and an evaluation do not overlap their gathers; each is a
    few milliseconds against a step's compute).

    Args:
        client: the trainer's feature client (``stats()`` keys ``rows_requested``, ``cache_hits``,
            ``bytes_received``, ``shm_bytes``).
        metrics: where each counted gather is also exported (Prometheus), or None.
    """

    def __init__(self, client: FeatureSource, metrics: TrainerMetrics | None = None) -> None:
        self._client, self._metrics = client, metrics
        self._lock = threading.Lock()
        self._totals = FeatureTotals()

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """A training step's gather, counted."""
        with self._lock:
            before = self._client.stats()
            rows = self._client.gather(ids)
            after = self._client.stats()
            delta = {k: int(after.get(k, 0) - before.get(k, 0))
                     for k in ("rows_requested", "cache_hits", "bytes_received", "shm_bytes")}
            fetched = delta["bytes_received"] + delta["shm_bytes"]
            self._totals += FeatureTotals(1, delta["rows_requested"], delta["cache_hits"], fetched)
        if self._metrics is not None:
            self._metrics.observe_features(delta["rows_requested"], delta["cache_hits"], fetched)
        return rows

    def gather_uncounted(self, ids: np.ndarray) -> np.ndarray:
        """Any other gather (evaluation): not counted, but kept apart from the counted ones."""
        with self._lock:
            return self._client.gather(ids)

    def totals(self) -> FeatureTotals:
        """The sums so far."""
        with self._lock:
            return FeatureTotals(**{f.name: getattr(self._totals, f.name) for f in fields(FeatureTotals)})


def serve_metrics(port: int, host: str = "127.0.0.1"):
    """Start the /metrics endpoint on ``port`` (0: a free one) on a daemon thread.

    Returns:
        The HTTP server; its port is ``server.server_address[1]``; ``server.shutdown()`` stops it.
    """
    server, _thread = start_http_server(port, addr=host)
    return server
