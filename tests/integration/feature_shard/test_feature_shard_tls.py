"""Real shard servers with TLS, mutual TLS and a token, over loopback: who gets rows and who does not.

The certificates are generated per module (tests/support/tls.py). A client
with the CA gets correct rows; plaintext, another CA and (with mTLS) no
client certificate are refused; a wrong or missing token is UNAUTHENTICATED
on the raw stub and a one-line ConfigError from FeatureClient, asked once per
shard and not retried; the health service stays open without a token (over
TLS when TLS is on); LocalShards passes its token through the environment,
never argv.
"""

from __future__ import annotations

import logging
import os

import grpc
import numpy as np
import pytest
from feature_shard_helpers import NUM_NODES, NUM_SHARDS, start_shards
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from saintpipe.cli.health_probe import HEALTHY, UNHEALTHY
from saintpipe.cli.health_probe import main as health_probe
from saintpipe.core.errors import ConfigError, ServiceUnavailable
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.protos import feature_shard_pb2_grpc as pb_grpc
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.launch import LocalShards
from saintpipe.services.feature_shard.security import TOKEN_ENV, ClientSecurity, ServerSecurity
from saintpipe.services.feature_shard.server import create_server, stop_server
from tests.support.tls import make_pki

TOKEN = "feature-shard-test-token-0123456789"
WRONG = "not-the-token-of-these-shards-42"
QUICK = dict(deadline=2.0, retry_deadline_s=1.0)  # refused connections: give up within a second


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory):
    """Another CA with its own certificates: trusted by nobody here."""
    return make_pki(tmp_path_factory.mktemp("other-pki"), name="other")


@pytest.fixture
def serve(feature_dataset):
    """Start every shard with the given security (and server options); stopped after the test."""
    started = []

    def start(max_message_bytes: int = 1 << 20, **security) -> list[list[str]]:
        servers, addresses = start_shards(
            feature_dataset, security=ServerSecurity(**security), max_message_bytes=max_message_bytes
        )
        started.extend(servers)
        return addresses

    yield start
    for server in started:
        stop_server(server, grace=0.5)


def _ids(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, NUM_NODES, 1500)


def _tls(pki) -> dict:
    return dict(tls_cert=pki.server_cert, tls_key=pki.server_key)


def test_a_client_with_the_ca_gets_the_right_rows_over_tls(serve, pki, full_matrix):
    addresses = serve(**_tls(pki))
    ids = _ids()
    for shared_memory in ("off", "auto"):
        with FeatureClient(addresses, shared_memory=shared_memory, security=ClientSecurity(tls_ca=pki.ca_cert)) as c:
            np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
            assert c.shared_memory_active == (shared_memory == "auto")  # the same host: rows skip the socket
    # A certificate issued to a service name, reached through an address: the name override.
    named = ClientSecurity(tls_ca=pki.ca_cert, tls_server_name=pki.server_name)
    with FeatureClient(addresses, shared_memory="off", security=named) as c:
        np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])


def test_plaintext_another_ca_and_another_name_are_refused(serve, pki, other_pki):
    addresses = serve(**_tls(pki))
    with grpc.insecure_channel(addresses[0][0]) as channel:  # the server closes a plaintext connection
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.FeatureShardStub(channel).Info(pb.InfoRequest(), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(ServiceUnavailable, match=r"feature shard \d: no replica answered Info"):
        FeatureClient(addresses, **QUICK)
    # Our side refuses the server's certificate: a configuration to fix, raised at once.
    with pytest.raises(ConfigError, match=f"feature shard {addresses[0][0]}: the TLS handshake failed .*"
                                          "CERTIFICATE_VERIFY_FAILED"):
        FeatureClient(addresses, security=ClientSecurity(tls_ca=other_pki.ca_cert))
    with pytest.raises(ConfigError, match="the TLS handshake failed .*Hostname Verification"):
        FeatureClient(addresses, security=ClientSecurity(tls_ca=pki.ca_cert, tls_server_name="elsewhere.test"))


def test_mutual_tls_requires_a_client_certificate_of_the_ca(serve, pki, other_pki, full_matrix):
    addresses = serve(**_tls(pki), tls_client_ca=pki.ca_cert)
    refused = [
        ClientSecurity(tls_ca=pki.ca_cert),
        ClientSecurity(tls_ca=pki.ca_cert, tls_cert=other_pki.client_cert, tls_key=other_pki.client_key),
    ]
    for security in refused:
        with pytest.raises(ServiceUnavailable, match="no replica answered Info"):
            FeatureClient(addresses, security=security, **QUICK)
    good = ClientSecurity(tls_ca=pki.ca_cert, tls_cert=pki.client_cert, tls_key=pki.client_key)
    with FeatureClient(addresses, security=good) as c:
        np.testing.assert_array_equal(c.gather(_ids(1)), full_matrix[_ids(1)])


def _unauthenticated(shard: int) -> float:
    labels = {"shard": str(shard), "code": "UNAUTHENTICATED"}
    return REGISTRY.get_sample_value("saintpipe_feature_errors_total", labels) or 0.0


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_a_wrong_or_missing_token_is_unauthenticated(serve, pki, full_matrix, tls):
    # A 4 KiB message limit: larger answers are streams (Gather), small ones single messages (GatherUnary).
    addresses = serve(token=TOKEN, max_message_bytes=4096, **(_tls(pki) if tls else {}))
    address = addresses[0][0]
    ca = dict(tls_ca=pki.ca_cert) if tls else {}
    if tls:
        credentials = grpc.ssl_channel_credentials(pki.ca_cert.read_bytes())
        channel = grpc.secure_channel(address, credentials)
    else:
        channel = grpc.insecure_channel(address)
    with channel:
        stub = pb_grpc.FeatureShardStub(channel)
        for metadata in ((), (("authorization", f"Bearer {WRONG}"),), (("authorization", TOKEN),)):
            with pytest.raises(grpc.RpcError) as err:
                stub.Info(pb.InfoRequest(), metadata=metadata, timeout=5)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert err.value.details() == "missing or wrong token"
        info = stub.Info(pb.InfoRequest(), metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=5)
        assert info.shard == 0
        # Health checks carry no token and need none.
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING

    before = [_unauthenticated(k) for k in range(NUM_SHARDS)]
    with pytest.raises(ConfigError) as err:
        FeatureClient(addresses, security=ClientSecurity(token=WRONG, **ca))
    assert str(err.value) in [
        f"feature shard {a[0]} refused our token (UNAUTHENTICATED): check --token-file / {TOKEN_ENV} "
        "(shards and clients need the same token)"
        for a in addresses
    ]
    assert WRONG not in str(err.value) and TOKEN not in str(err.value)
    # Not retried: each shard saw at most the one Info call.
    refusals = [_unauthenticated(k) - b for k, b in enumerate(before)]
    assert 1 <= sum(refusals) and max(refusals) <= 1, refusals
    with pytest.raises(ConfigError, match=f"feature shard .* requires a token .UNAUTHENTICATED. and this client "
                                          f"sends none: set {TOKEN_ENV}"):
        FeatureClient(addresses, security=ClientSecurity(**ca))
    token_file = pki.ca_cert.parent / "token"
    token_file.write_text(TOKEN + "\n")
    security = ClientSecurity(token_file=token_file, **ca)
    ids = _ids(2)
    with FeatureClient(addresses, security=security) as c:  # Info, ProbeSharedMemory, shared-memory GatherUnary
        np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
        assert c.shared_memory_active and c.stats()["bytes_received"] == 0
    with FeatureClient(addresses, security=security, shared_memory="off") as c:  # Gather (streams), GatherUnary
        np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
        np.testing.assert_array_equal(c.gather(np.array([5])), full_matrix[[5]])
        assert c.stats()["bytes_received"] > 0


def test_the_health_probe_speaks_tls(serve, pki, other_pki, capsys):
    address = serve(**_tls(pki), token=TOKEN)[0][0]
    assert health_probe(["grpc", address, "--tls-ca", str(pki.ca_cert)]) == HEALTHY
    assert health_probe(["grpc", address.replace("127.0.0.1", "localhost"), "--tls-ca", str(pki.ca_cert)]) == HEALTHY
    assert health_probe(["grpc", address, "--tls-ca", str(pki.ca_cert),
                         "--tls-server-name", pki.server_name]) == HEALTHY
    assert health_probe(["grpc", address]) == UNHEALTHY  # plaintext against a TLS port
    assert health_probe(["grpc", address, "--tls-ca", str(other_pki.ca_cert)]) == UNHEALTHY
    assert "CERTIFICATE_VERIFY_FAILED" in capsys.readouterr().err
    mtls = serve(**_tls(pki), tls_client_ca=pki.ca_cert)[0][0]
    assert health_probe(["grpc", mtls, "--tls-ca", str(pki.ca_cert)]) == UNHEALTHY
    assert health_probe(["grpc", mtls, "--tls-ca", str(pki.ca_cert), "--tls-cert", str(pki.client_cert),
                         "--tls-key", str(pki.client_key)]) == HEALTHY
    with pytest.raises(SystemExit) as usage:
        health_probe(["grpc", address, "--tls-ca", str(pki.ca_cert.parent / "missing.crt")])
    assert usage.value.code == 2 and "--tls-ca" in capsys.readouterr().err


def test_the_start_log_says_what_is_on_and_warns_about_open_ports(feature_dataset, pki, caplog):
    caplog.set_level(logging.INFO, logger="saintpipe.services.feature_shard.server")
    settings = [
        ("127.0.0.1", ServerSecurity(), "plaintext (no TLS), no token", False),
        ("0.0.0.0", ServerSecurity(), "plaintext (no TLS), no token", True),
        ("0.0.0.0", ServerSecurity(token=TOKEN), "plaintext (no TLS), token required", True),
        ("0.0.0.0", ServerSecurity(**_tls(pki), tls_client_ca=pki.ca_cert, token=TOKEN),
         "TLS with client certificates (mTLS), token required", False),
    ]
    for host, security, described, warned in settings:
        caplog.clear()
        server, _ = create_server(feature_dataset, 0, host=host, security=security)
        stop_server(server, grace=0)
        assert any(r.getMessage().endswith(described) for r in caplog.records), caplog.text
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == int(warned), warnings
        if warned:
            assert "without TLS" in warnings[0] and "read every feature row" in warnings[0]
            assert ("a token" in warnings[0]) == (security.token is None)
        assert TOKEN not in caplog.text


def test_local_shards_pass_their_token_through_the_environment_not_argv(feature_dataset, full_matrix):
    with LocalShards(feature_dataset, NUM_SHARDS) as shards:
        token = shards.token_file.read_text().strip()
        assert len(token) >= 32 and shards.token_file.stat().st_mode & 0o777 == 0o600
        for replicas in shards.processes:
            for p in replicas:
                argv = open(f"/proc/{p.process.pid}/cmdline", "rb").read()
                environ = open(f"/proc/{p.process.pid}/environ", "rb").read().split(b"\0")
                assert token.encode() not in argv
                assert f"{TOKEN_ENV}={token}".encode() in environ
        with pytest.raises(ConfigError, match="requires a token"):
            FeatureClient(shards.addresses)
        with FeatureClient(shards.addresses, security=shards.client_security()) as c:
            np.testing.assert_array_equal(c.gather(_ids(3)), full_matrix[_ids(3)])
        token_dir = shards.token_file.parent
    assert not token_dir.exists()  # the token goes with the shards


def test_the_cli_reads_tls_flags_and_the_token_from_the_environment(cli, feature_dataset, pki, tmp_path):
    env = {TOKEN_ENV: "change-me"}
    proc = cli("serve", "feature-shard", "--data", str(feature_dataset), "--shard", "0", "--port", "0",
               check=False, env=env)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert f"environment variable {TOKEN_ENV}: the feature-shard token is still the 'change-me' placeholder" in (
        proc.stderr)
    proc = cli("serve", "feature-shard", "--data", str(feature_dataset), "--shard", "0", "--port", "0",
               "--tls-cert", str(pki.server_cert), "--tls-key", str(tmp_path / "missing.key"), check=False,
               env={TOKEN_ENV: TOKEN})
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert f"feature_shard.tls_key (--tls-key) {tmp_path / 'missing.key'}: cannot read it" in proc.stderr
    assert TOKEN not in proc.stderr + proc.stdout
    assert os.environ.get(TOKEN_ENV) != TOKEN  # nothing leaked into this process


def test_serve_trainer_checks_its_feature_tls_flags_before_starting(cli, feature_dataset, tmp_path):
    proc = cli("serve", "trainer", "--redis-url", "redis://127.0.0.1:1/0", "--features", "127.0.0.1:1",
               "--data", str(feature_dataset), "--job", "j", "--feature-tls-ca", str(tmp_path / "ca.crt"),
               check=False, env={TOKEN_ENV: TOKEN})
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert f"trainer.feature_tls_ca (--feature-tls-ca) {tmp_path / 'ca.crt'}: cannot read it" in proc.stderr
