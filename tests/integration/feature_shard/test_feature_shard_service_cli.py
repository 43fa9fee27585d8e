"""`saintpipe serve feature-shard` as a real process: health, metrics scrape, clean SIGTERM, CLI errors."""

from __future__ import annotations

import re
import urllib.request

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from saintpipe.core.errors import ServiceUnavailable
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.protos import feature_shard_pb2_grpc as pb_grpc
from saintpipe.services.feature_shard.launch import ShardProcess
from saintpipe.services.feature_shard.wire import SERVICE_NAME, encode_ids


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (label order does not matter)."""
    for match in re.finditer(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", text, re.M):
        if dict(re.findall(r'(\w+)="([^"]*)"', match.group(1))) == labels:
            return float(match.group(2))
    raise AssertionError(f"{name}{labels} not in the scrape")


def test_served_shard_health_metrics_and_sigterm(feature_dataset, full_matrix):
    shard = ShardProcess(feature_dataset, 1, extra_args=["--metrics-port", "0"])
    try:
        assert shard.metrics_url and shard.metrics_url.startswith("http://127.0.0.1:")
        assert any(line == f"listening on {shard.address}" for line in shard.output)
        with grpc.insecure_channel(shard.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", SERVICE_NAME):
                reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as err:
                health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND

            stub = pb_grpc.FeatureShardStub(channel)
            info = stub.Info(pb.InfoRequest(), timeout=5)
            ids = np.arange(info.start, info.start + 300)[::-1]
            chunks = list(stub.Gather(pb.GatherRequest(ids=encode_ids(ids)), timeout=5))
            rows = np.concatenate([np.frombuffer(c.rows, np.float32).reshape(tuple(c.shape)) for c in chunks])
            np.testing.assert_array_equal(rows, full_matrix[ids])
            with pytest.raises(grpc.RpcError):
                list(stub.Gather(pb.GatherRequest(ids=encode_ids(np.array([0]))), timeout=5))

        scrape = urllib.request.urlopen(shard.metrics_url, timeout=5).read().decode()
        assert _sample(scrape, "saintpipe_feature_requests_total", shard="1") == 1
        assert _sample(scrape, "saintpipe_feature_rows_total", shard="1") == 300
        assert _sample(scrape, "saintpipe_feature_bytes_total", shard="1") >= 300 * full_matrix.shape[1] * 4
        assert _sample(scrape, "saintpipe_feature_errors_total", shard="1", code="INVALID_ARGUMENT") == 1
        assert _sample(scrape, "saintpipe_feature_request_seconds_count", shard="1") == 1
    finally:
        code = shard.stop()  # SIGTERM: graceful
    assert code == 0
    assert "SIGTERM: stopping" in "\n".join(shard.output) and shard.output[-1] == "stopped"


def test_a_server_that_cannot_start_is_reported_with_its_error(tmp_path):
    with pytest.raises(ServiceUnavailable, match="shard 0 did not start .exit code 2.*dataset directory"):
        ShardProcess(tmp_path / "missing", 0)


def test_cli_errors_are_one_line(cli, tmp_path):
    proc = cli("serve", "feature-shard", "--data", str(tmp_path / "missing"), "--shard", "0", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "dataset directory not found" in proc.stderr
    proc = cli(
        "serve", "feature-shard", "--shard", "0", check=False, env={"SAINTPIPE_FEATURE_SHARD__PORT": "x"}
    )
    assert (
        proc.returncode == 2
        and "data" in proc.stderr
        and "port" in proc.stderr
        and "Traceback" not in proc.stderr
    )
