"""The sampler host's one Prometheus endpoint (names from docs/metrics.md).

Workers live in other processes, so this is a custom collector: at each
scrape it asks the supervisor for its latest per-worker totals and the pool's
stats and renders them. Nothing is double counted and a restarted worker's
earlier counts are kept (the supervisor adds them up).
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from services.sampler_service.counters import WorkerCounters

# pool.stats() field -> metric name (all gauges labelled by job).
POOL_GAUGES: dict[str, str] = {
    "depth": "saintpipe_pool_depth",
    "pending": "saintpipe_pool_pending",
    "produced": "saintpipe_pool_produced_total",
    "acknowledged": "saintpipe_pool_acknowledged_total",
    "redelivered": "saintpipe_pool_redelivered_total",
}


class MetricsSnapshot:
    """What one scrape shows: per-worker totals and restarts, and the pool's stats."""

    def __init__(self, workers: Mapping[int, WorkerCounters], restarts: Mapping[int, int], job: str,
                 pool: Mapping[str, float] | None) -> None:
        self.workers, self.restarts, self.job, self.pool = workers, restarts, job, pool


class SamplerCollector:
    """A prometheus_client collector over a snapshot function."""

    def __init__(self, snapshot: Callable[[], MetricsSnapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        # Counter families are named without _total; prometheus_client appends it.
        families = {
            "subgraphs": CounterMetricFamily("saintpipe_sampler_subgraphs", "Subgraphs pushed to the pool",
                                             labels=["worker"]),
            "nodes": CounterMetricFamily("saintpipe_sampler_nodes", "Nodes in the pushed subgraphs",
                                         labels=["worker"]),
            "edges": CounterMetricFamily("saintpipe_sampler_edges", "Edges in the pushed subgraphs",
                                         labels=["worker"]),
            "pool_wait": CounterMetricFamily("saintpipe_sampler_pool_wait_seconds",
                                             "Seconds blocked on a full pool", labels=["worker"]),
        }
        restarts = CounterMetricFamily("saintpipe_sampler_restarts", "Times a worker was restarted",
                                       labels=["worker"])
        hist = HistogramMetricFamily("saintpipe_sampler_sample_seconds", "Seconds to draw and induce one subgraph",
                                     labels=["worker"])
        for worker, c in sorted(snap.workers.items()):
            label = [str(worker)]
            families["subgraphs"].add_metric(label, c.subgraphs)
            families["nodes"].add_metric(label, c.nodes)
            families["edges"].add_metric(label, c.edges)
            families["pool_wait"].add_metric(label, c.pool_wait_seconds)
            restarts.add_metric(label, snap.restarts.get(worker, 0))
            hist.add_metric(label, c.cumulative_buckets(), c.sample_seconds_sum)
        yield from families.values()
        yield restarts
        yield hist
        if snap.pool is not None:
            for field, name in POOL_GAUGES.items():
                if field in snap.pool:
                    gauge = GaugeMetricFamily(name, f"Pool {field} (from the pool's stats)", labels=["job"])
                    gauge.add_metric([snap.job], float(snap.pool[field]))
                    yield gauge


class MetricsServer:
    """Serves a :class:`SamplerCollector` over HTTP on its own registry."""

    def __init__(self, snapshot: Callable[[], MetricsSnapshot], host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SamplerCollector(snapshot))
        self._httpd, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.host = host
        self.port = int(self._httpd.server_port)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
