"""saintpipe.cli.health_probe against real servers on loopback.

The compose health checks run `python -m saintpipe.cli.health_probe ...` inside
the containers; here the same probe asks a real gRPC server with the standard
health service, a real prometheus_client metrics endpoint, and closed ports.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from tests.support.cli import free_port
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry, Counter, start_http_server

from saintpipe.cli.health_probe import HEALTHY, UNHEALTHY, main, split_host_port

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def grpc_health_server():
    """A gRPC server with the health service; yields (target, servicer)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        server.stop(grace=None).wait()


@pytest.fixture
def metrics_endpoint():
    registry = CollectorRegistry()
    Counter("saintpipe_probe_test_total", "a counter", registry=registry).inc()
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_grpc_probe_follows_the_serving_status(grpc_health_server, capsys):
    target, servicer = grpc_health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert main(["grpc", target]) == HEALTHY
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert main(["grpc", target]) == UNHEALTHY
    assert "NOT_SERVING" in capsys.readouterr().err
    servicer.set("saintpipe.FeatureShard", health_pb2.HealthCheckResponse.SERVING)
    assert main(["grpc", target, "--service", "saintpipe.FeatureShard"]) == HEALTHY
    assert main(["grpc", target, "--service", "no.such.Service"]) == UNHEALTHY
    assert "NOT_FOUND" in capsys.readouterr().err


def test_grpc_probe_fails_on_a_closed_port(capsys):
    assert main(["--timeout", "1", "grpc", f"127.0.0.1:{free_port()}"]) == UNHEALTHY
    assert "UNAVAILABLE" in capsys.readouterr().err


def test_http_probe(metrics_endpoint, capsys):
    assert main(["http", f"{metrics_endpoint}/metrics"]) == HEALTHY
    assert main(["http", f"http://{metrics_endpoint}/metrics"]) == HEALTHY
    assert main(["--timeout", "1", "http", f"127.0.0.1:{free_port()}/metrics"]) == UNHEALTHY
    assert "unhealthy: http" in capsys.readouterr().err


def test_tcp_probe(metrics_endpoint):
    assert main(["tcp", metrics_endpoint]) == HEALTHY
    assert main(["--timeout", "1", "tcp", f"127.0.0.1:{free_port()}"]) == UNHEALTHY


def test_bad_target_is_a_usage_error():
    with pytest.raises(SystemExit) as exc:
        main(["tcp", "localhost"])
    assert exc.value.code == 2
    with pytest.raises(ValueError, match="HOST:PORT"):
        split_host_port("host:99999")
    assert split_host_port("[::1]:50051") == ("::1", 50051)


def test_module_entry_point_exit_status(grpc_health_server):
    # What a compose health check runs, as a process.
    target, servicer = grpc_health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    run = [sys.executable, "-m", "saintpipe.cli.health_probe", "grpc", target]
    proc = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "healthy: grpc" in proc.stdout, proc.stderr
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    proc = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1 and "unhealthy" in proc.stderr
