"""A container health probe: ``python -m saintpipe.cli.health_probe KIND TARGET``.

Docker Compose health checks run a command inside the container and read its
exit status. The saintpipe image has no curl, grpcurl or grpc_health_probe, so
this module is the one probe every service's health check uses:

- ``grpc HOST:PORT [--service NAME]``: the standard gRPC health protocol
  (``grpc.health.v1.Health/Check``); healthy only when the answer is SERVING.
  The feature shards register the health service.
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


def probe_grpc(target: str, service: str = "", timeout: float = 3.0) -> str:
    """Ask a gRPC server's health service whether ``service`` is SERVING.

    Returns:
        The status name (``"SERVING"``).

    Raises:
        ProbeFailed: on any other status, an unreachable server or a server
            without the health service.
    """
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    split_host_port(target)
    with grpc.insecure_channel(target) as channel:
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
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for an answer (default 3)")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    grpc_p = kinds.add_parser("grpc", help="gRPC health protocol check")
    grpc_p.add_argument("target", metavar="HOST:PORT")
    grpc_p.add_argument("--service", default="", help="service name to ask about (default: the whole server)")
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
            result = probe_grpc(args.target, args.service, args.timeout)
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
