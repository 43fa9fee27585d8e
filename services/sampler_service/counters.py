"""What one worker counts, as plain numbers that travel from the actor to the supervisor.

Workers cannot share one Prometheus registry (they are separate processes,
possibly on other hosts), so each keeps these counters since its own start and
the supervisor, which serves the one endpoint per host, polls them and adds
what earlier incarnations of the same worker had counted.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field, fields

# Seconds to draw and induce one subgraph: from tiny test graphs to large budgets.
SAMPLE_SECONDS_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)


def _zeros() -> list[int]:
    return [0] * (len(SAMPLE_SECONDS_BUCKETS) + 1)


@dataclass
class WorkerCounters:
    """Cumulative counts of one worker incarnation (or of several, once added together)."""

    subgraphs: int = 0
    nodes: int = 0
    edges: int = 0
    sample_seconds_sum: float = 0.0
    # Non-cumulative counts per bucket; the last is (+Inf): observations above the top bound.
    sample_seconds_buckets: list[int] = field(default_factory=_zeros)
    pool_wait_seconds: float = 0.0
    # CPU seconds of the worker process while producing (all its threads); for benchmarks, not exported.
    cpu_seconds: float = 0.0
    # CPU seconds of the drawing thread inside the sampler's sample() calls; for benchmarks, not exported.
    sample_cpu_seconds: float = 0.0

    def observe(self, nodes: int, edges: int, sample_seconds: float, pool_wait_seconds: float,
                sample_cpu_seconds: float = 0.0) -> None:
        """Count one subgraph pushed to the pool."""
        self.subgraphs += 1
        self.sample_cpu_seconds += sample_cpu_seconds
        self.nodes += nodes
        self.edges += edges
        self.sample_seconds_sum += sample_seconds
        self.sample_seconds_buckets[bisect.bisect_left(SAMPLE_SECONDS_BUCKETS, sample_seconds)] += 1
        self.pool_wait_seconds += pool_wait_seconds

    def add(self, other: "WorkerCounters") -> "WorkerCounters":
        """The element-wise sum of two counter sets (a new object)."""
        return WorkerCounters(**{f.name: _plus(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)})

    def cumulative_buckets(self) -> list[tuple[str, int]]:
        """Prometheus-style (upper bound, cumulative count) pairs ending with +Inf."""
        return list(zip([*map(str, SAMPLE_SECONDS_BUCKETS), "+Inf"], itertools.accumulate(self.sample_seconds_buckets)))


def _plus(a, b):
    """One field of :meth:`WorkerCounters.add`: numbers add, bucket lists add element-wise."""
    return [x + y for x, y in zip(a, b)] if isinstance(a, list) else a + b
