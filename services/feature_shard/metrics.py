"""Prometheus metrics of the feature service (docs/reference/metric-list.md lists them, from here).

The metric objects live in the default registry, created once per process;
several shard servers or clients in one process share them and differ by label.
"""

from __future__ import annotations

import logging

import prometheus_client
from prometheus_client import Counter, Histogram

from saintpipe.core.errors import ServiceUnavailable

log = logging.getLogger(__name__)

REQUESTS = Counter("saintpipe_feature_requests_total", "Gather calls answered by a feature shard", ["shard"])
ROWS = Counter("saintpipe_feature_rows_total", "Feature rows sent by a feature shard", ["shard"])
BYTES = Counter("saintpipe_feature_bytes_total", "Feature row bytes sent by a feature shard", ["shard"])
ERRORS = Counter("saintpipe_feature_errors_total", "Failed calls of a feature shard", ["shard", "code"])
REQUEST_SECONDS = Histogram(
    "saintpipe_feature_request_seconds",
    "Server-side latency of one gather (decode, read rows, encode every chunk)",
    ["shard"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
CACHE_HITS = Counter(
    "saintpipe_feature_cache_hits_total", "Requested rows served by the trainer-side cache", ["trainer"]
)
CACHE_MISSES = Counter(
    "saintpipe_feature_cache_misses_total", "Requested rows the trainer-side cache did not hold", ["trainer"]
)


def start_metrics_server(host: str, port: int):
    """Serve ``/metrics`` (the default registry) over HTTP; returns ``(httpd, bound port)``.

    ``port=0`` picks a free port. Stop it with ``httpd.shutdown(); httpd.server_close()``.

    Raises:
        ServiceUnavailable: the address cannot be bound.
    """
    try:
        httpd, _thread = prometheus_client.start_http_server(port, addr=host)
    except OSError as exc:
        raise ServiceUnavailable(f"cannot serve metrics on {host}:{port}: {exc}") from None
    bound = httpd.server_address[1]
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return httpd, bound
