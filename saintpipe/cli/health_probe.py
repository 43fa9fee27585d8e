"""A container health probe: ``python -m saintpipe.cli.health_probe KIND TARGET``.

Docker Compose health checks run a command inside the container and read its exit status. The saintpipe image
has no curl, grpcurl or grpc_health_probe, so this module is the one probe every service's health check uses:

- ``grpc HOST:PORT [--service NAME] [--tls-ca FILE [--tls-server-name NAME] [--tls-cert FILE --tls-key
  FILE]]``: the standard gRPC health protocol (``grpc.health.v1.Health/Check``); healthy only when the answer
  is SERVING. The feature shards register the health service; it needs no token, but a shard with TLS on
  answers over TLS only (``--tls-ca``; a shard that requires client certificates also needs
  ``--tls-cert``/``--tls-key``).
- ``http URL``: an HTTP GET (e.g. a ``/metrics`` endpoint); healthy on a 2xx.
- ``tcp HOST:PORT``: a TCP connect; healthy when the port accepts.

Exit status: 0 healthy, 1 unhealthy (one line on stderr says why), 2 usage.
"""

from __future__ import annotations

import argparse
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence

from saintpipe.core.argtypes import real

HEALTHY = 0
UNHEALTHY = 1


class ProbeFailed(Exception):
    """The target answered badly or not at all; the message says how."""


def split_host_port(target: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (or ``[v6]:PORT``) into its parts.

    Raises:
        ValueError: naming the target when it has no valid port.
    """
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"target {target!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _read_pem(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from None
    if b"-----BEGIN" not in data:
        raise ValueError(f"{flag} {path}: not a PEM file")
    return data


def probe_grpc(target: str, service: str = "", timeout: float = 3.0, *, tls_ca: str | None = None,
               tls_server_name: str | None = None, tls_cert: str | None = None, tls_key: str | None = None) -> str:
    """Ask a gRPC server's health service whether ``service`` is SERVING.

    Args:
        tls_ca: PEM CA bundle: talk TLS, verifying the server's certificate against it (None: plaintext).
        tls_server_name: the name to expect on the server's certificate instead of the target's host.
        tls_cert, tls_key: a client certificate, for servers that require one (mutual TLS).

    Returns:
        The status name (``"SERVING"``).

    Raises:
        ProbeFailed: on any other status, an unreachable server or a server without the health service.
        ValueError: a TLS option without ``tls_ca``, a certificate without its key, a file unreadable or not PEM.
    """
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    split_host_port(target)
    if tls_ca is None and (tls_server_name or tls_cert or tls_key):
        raise ValueError("--tls-server-name, --tls-cert and --tls-key need --tls-ca")
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    if tls_ca is None:
        channel = grpc.insecure_channel(target)
    else:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_pem(tls_ca, "--tls-ca"),
            private_key=_read_pem(tls_key, "--tls-key") if tls_key else None,
            certificate_chain=_read_pem(tls_cert, "--tls-cert") if tls_cert else None,
        )
        options = [("grpc.ssl_target_name_override", tls_server_name)] if tls_server_name else []
        channel = grpc.secure_channel(target, credentials, options=options)
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            raise ProbeFailed(f"grpc {target}: {exc.code().name}: {exc.details()}") from None
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        raise ProbeFailed(f"grpc {target}: service {service!r} is {status}")
    return status


def probe_http(url: str, timeout: float = 3.0) -> str:
    """GET ``url``; returns ``"HTTP <code>"`` on a 2xx answer.

    Raises:
        ProbeFailed: on a refused connection, a timeout or a non-2xx answer.
    """
    if "://" not in url:
        url = f"http://{url}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            code = reply.status
    except urllib.error.HTTPError as exc:
        raise ProbeFailed(f"http {url}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProbeFailed(f"http {url}: {reason}") from None
    if not 200 <= code < 300:
        raise ProbeFailed(f"http {url}: HTTP {code}")
    return f"HTTP {code}"


def probe_tcp(target: str, timeout: float = 3.0) -> str:
    """Open a TCP connection to ``HOST:PORT``; returns ``"open"``.

    Raises:
        ProbeFailed: when the connection is refused or times out.
    """
    host, port = split_host_port(target)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return "open"
    except OSError as exc:
        raise ProbeFailed(f"tcp {target}: {exc.strerror or exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m saintpipe.cli.health_probe",
                                     description="Exit 0 when the target is healthy, 1 when it is not.")
    parser.add_argument("--timeout", type=real(0, 3600, min_open=True), default=3.0,
                        help="seconds to wait for an answer (default 3)")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    grpc_p = kinds.add_parser("grpc", help="gRPC health protocol check")
    grpc_p.add_argument("target", metavar="HOST:PORT")
    grpc_p.add_argument("--service", default="", help="service name to ask about (default: the whole server)")
    grpc_p.add_argument("--tls-ca", metavar="FILE", help="PEM CA bundle: talk TLS and verify the server against it")
    grpc_p.add_argument("--tls-server-name", metavar="NAME",
                        help="name on the server's certificate, when not the target's host (needs --tls-ca)")
    grpc_p.add_argument("--tls-cert", metavar="FILE", help="PEM client certificate, for servers that require one")
    grpc_p.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    http_p = kinds.add_parser("http", help="HTTP GET, healthy on 2xx")
    http_p.add_argument("target", metavar="URL")
    tcp_p = kinds.add_parser("tcp", help="TCP connect")
    tcp_p.add_argument("target", metavar="HOST:PORT")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one probe; returns the exit status (0 healthy, 1 unhealthy, 2 usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.kind == "grpc":
            result = probe_grpc(args.target, args.service, args.timeout, tls_ca=args.tls_ca,
                                tls_server_name=args.tls_server_name, tls_cert=args.tls_cert, tls_key=args.tls_key)
        elif args.kind == "http":
            result = probe_http(args.target, args.timeout)
        else:
            result = probe_tcp(args.target, args.timeout)
    except ValueError as exc:
        parser.error(str(exc))
    except ProbeFailed as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return UNHEALTHY
    print(f"healthy: {args.kind} {args.target}: {result}")
    return HEALTHY


if __name__ == "__main__":
    sys.exit(main())
