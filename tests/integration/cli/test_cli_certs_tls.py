"""``saintpipe certs generate`` makes TLS material a real gRPC server and client accept: a client trusting ca.crt
reaches the server by localhost and 127.0.0.1, one trusting another CA or dialling a name outside the SAN does
not, and with --client the server admits only clients holding client.crt.

The server is a plain grpc server with the standard health service, so these tests check the certificates,
not saintpipe's shard server (whose TLS flags have tests of their own).
"""

from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tests.support.cli import run_cli


def _generate(out: Path, *flags: str) -> list[str]:
    proc = run_cli("certs", "generate", "--out", str(out), "--host", "feature-shard-0", *flags)
    return proc.stdout.splitlines()


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("certs")
    _generate(root / "plain", "--token")
    _generate(root / "mutual", "--client")
    _generate(root / "other", "--client")
    return {name: root / name for name in ("plain", "mutual", "other")}


class _HealthServer:
    """A grpc server serving the health service over TLS from a bundle's server.crt/key."""

    def __init__(self, bundle: Path, require_client_auth: bool) -> None:
        credentials = grpc.ssl_server_credentials(
            [((bundle / "server.key").read_bytes(), (bundle / "server.crt").read_bytes())],
            root_certificates=(bundle / "ca.crt").read_bytes() if require_client_auth else None,
            require_client_auth=require_client_auth)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), self.server)
        self.port = self.server.add_secure_port("localhost:0", credentials)
        self.server.start()

    def check(self, trusted_ca: Path, client_pair: Path | None = None, host: str = "localhost",
              name_override: str | None = None) -> int:
        """Call Health/Check; returns the serving status, or raises grpc.RpcError."""
        pair = {}
        if client_pair is not None:
            pair = {"private_key": (client_pair / "client.key").read_bytes(),
                    "certificate_chain": (client_pair / "client.crt").read_bytes()}
        credentials = grpc.ssl_channel_credentials(root_certificates=(trusted_ca / "ca.crt").read_bytes(), **pair)
        options = [("grpc.ssl_target_name_override", name_override)] if name_override else []
        with grpc.secure_channel(f"{host}:{self.port}", credentials, options=options) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        return reply.status

    def stop(self) -> None:
        self.server.stop(grace=1).wait()


@pytest.fixture
def tls_server(bundles):
    servers: list[_HealthServer] = []

    def start(name: str, require_client_auth: bool = False) -> _HealthServer:
        servers.append(_HealthServer(bundles[name], require_client_auth))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


SERVING = health_pb2.HealthCheckResponse.SERVING


def test_a_client_trusting_the_ca_reaches_the_server_by_localhost_and_ip(bundles, tls_server):
    server = tls_server("plain")
    assert server.check(bundles["plain"]) == SERVING
    assert server.check(bundles["plain"], host="127.0.0.1") == SERVING
    # The name compose's clients dial: in the SAN, checked by name override since it does not resolve here.
    assert server.check(bundles["plain"], name_override="feature-shard-0") == SERVING


def test_a_client_trusting_another_ca_is_refused(bundles, tls_server):
    server = tls_server("plain")
    with pytest.raises(grpc.RpcError) as failure:
        server.check(bundles["other"])
    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_name_outside_the_san_is_refused(bundles, tls_server):
    server = tls_server("plain")
    with pytest.raises(grpc.RpcError) as failure:
        server.check(bundles["plain"], name_override="feature-shard-9")
    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE


def test_with_client_auth_only_a_client_holding_client_crt_gets_in(bundles, tls_server):
    server = tls_server("mutual", require_client_auth=True)
    assert server.check(bundles["mutual"], client_pair=bundles["mutual"]) == SERVING
    with pytest.raises(grpc.RpcError) as without:
        server.check(bundles["mutual"])
    assert without.value.code() == grpc.StatusCode.UNAVAILABLE
    # A client certificate of another CA is no better than none.
    with pytest.raises(grpc.RpcError) as foreign:
        server.check(bundles["mutual"], client_pair=bundles["other"])
    assert foreign.value.code() == grpc.StatusCode.UNAVAILABLE


def test_generate_prints_paths_never_secrets(tmp_path):
    out = tmp_path / "certs"
    proc = run_cli("certs", "generate", "--out", str(out), "--host", "feature-shard-0", "--client", "--token")
    assert proc.stdout.splitlines() == [f"wrote {out / name}" for name in
                                        ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt",
                                         "client.key", "token")]
    token = (out / "token").read_text().strip()
    for text in (proc.stdout, proc.stderr):
        assert token not in text and "PRIVATE KEY" not in text
    kept = run_cli("certs", "generate", "--out", str(out), "--host", "feature-shard-0", "--client", "--token",
                   "--keep-existing")
    assert kept.stdout.startswith(f"kept {out}: complete, covers every host")


def test_errors_are_one_line_without_traceback(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.csv").write_text("1,2,3\n")
    proc = run_cli("certs", "generate", "--out", str(precious), "--host", "x", "--force", check=False)
    assert proc.returncode == 2
    assert proc.stderr == (f"saintpipe: error: --out {precious}: holds files that are not a saintpipe certificate "
                           "bundle (data.csv); refusing to write there, even with --force; choose an empty or new "
                           "directory\n")
    assert sorted(p.name for p in precious.iterdir()) == ["data.csv"]
    bad_host = run_cli("certs", "generate", "--out", str(tmp_path / "c"), "--host", "shard:50051", check=False)
    assert bad_host.returncode == 2 and "Traceback" not in bad_host.stderr
    assert bad_host.stderr.strip().endswith("--host 'shard:50051': not a host name or IP address (letters, digits, "
                                            "'-', '_' and dots; no wildcards, ports or URLs)")
    days = run_cli("certs", "generate", "--out", str(tmp_path / "c"), "--days", "99999", check=False)
    assert days.returncode == 2 and "argument --days: must be an integer from 1 to 3650, got 99999" in days.stderr


def test_show_prints_subject_sans_issuer_and_expiry(bundles):
    proc = run_cli("certs", "show", str(bundles["mutual"]))
    text = proc.stdout
    assert f"{bundles['mutual'] / 'server.crt'}\n" in text
    assert "SANs:      feature-shard-0, localhost, 127.0.0.1" in text
    assert "purpose:   client" in text and "signed by ca.crt: yes" in text
    assert "issuer:    CN=saintpipe CA " in text and "(expires in 36" in text
