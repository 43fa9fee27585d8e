"""The sampler host's one Prometheus endpoint (docs/reference/metric-list.md lists its metrics, from here).

Workers live in other processes, so the sampler metrics come from a custom
collector: at each scrape it asks the supervisor for its latest per-worker
totals and renders them (a restarted worker's earlier counts included). The
pool gauges are the pool package's own :class:`~saintpipe.services.pool.metrics.PoolMetrics`
on the same registry, updated by the supervisor from ``pool.stats()``.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping, NamedTuple

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from saintpipe.services.pool.metrics import PoolMetrics
from saintpipe.services.sampler_service.counters import WorkerCounters


class MetricsSnapshot(NamedTuple):
    """Per-worker totals and restarts at one instant."""

    workers: Mapping[int, WorkerCounters]
    restarts: Mapping[int, int]


class SamplerCollector:
    """A prometheus_client collector over a snapshot function."""

    def __init__(self, snapshot: Callable[[], MetricsSnapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()

        def counter(name: str, doc: str) -> CounterMetricFamily:
            return CounterMetricFamily(name, doc, labels=["worker"])  # the client appends _total

        subgraphs = counter("saintpipe_sampler_subgraphs", "Subgraphs pushed to the pool")
        nodes = counter("saintpipe_sampler_nodes", "Nodes in the pushed subgraphs")
        edges = counter("saintpipe_sampler_edges", "Edges in the pushed subgraphs")
        waited = counter("saintpipe_sampler_pool_wait_seconds", "Seconds blocked on a full pool")
        restarts = counter("saintpipe_sampler_restarts", "Times a worker was restarted")
        hist = HistogramMetricFamily("saintpipe_sampler_sample_seconds", "Seconds to draw and induce one subgraph",
                                     labels=["worker"])
        for worker, c in sorted(snap.workers.items()):
            label = [str(worker)]
            subgraphs.add_metric(label, c.subgraphs)
            nodes.add_metric(label, c.nodes)
            edges.add_metric(label, c.edges)
            waited.add_metric(label, c.pool_wait_seconds)
            restarts.add_metric(label, snap.restarts.get(worker, 0))
            hist.add_metric(label, c.cumulative_buckets(), c.sample_seconds_sum)
        yield from (subgraphs, nodes, edges, waited, restarts, hist)


class MetricsServer:
    """Serves the sampler collector and the pool gauges over HTTP, on a registry of its own."""

    def __init__(self, snapshot: Callable[[], MetricsSnapshot], host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SamplerCollector(snapshot))
        self.pool = PoolMetrics(self.registry)
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
