"""TLS material for tests: a throwaway CA, server and client certificates, written as PEM files.

Issued by :mod:`saintpipe.core.certificates` (the code behind ``saintpipe
certs``; EC P-256, valid one day), so tests need no openssl binary and no
files in the repository::

    pki = make_pki(tmp_path)
    create_server(data, 0, security=ServerSecurity(tls_cert=pki.server_cert, tls_key=pki.server_key))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from saintpipe.core.certificates import make_ca, make_leaf, pem_cert, pem_key


@dataclass(frozen=True)
class Pki:
    """Paths of one test PKI: a CA, a server certificate (localhost, 127.0.0.1 and ``server_name``), a client
    certificate, each with its key."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    server_name: str  # a DNS name in the server certificate that no address resolves to


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def make_pki(directory: Path, name: str = "test", server_name: str = "feature-shard.test") -> Pki:
    """Write a CA, a server and a client certificate (with keys) under ``directory``; file names start with
    ``name`` (two PKIs can share a directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = make_ca(f"{name} CA", days=1)
    server_key, server = make_leaf(ca_key, ca, server_name, ["localhost", server_name], ["127.0.0.1"], days=1)
    client_key, client = make_leaf(ca_key, ca, f"{name} client", [], [], days=1, client=True)
    return Pki(
        ca_cert=_write(directory / f"{name}-ca.crt", pem_cert(ca)),
        ca_key=_write(directory / f"{name}-ca.key", pem_key(ca_key)),
        server_cert=_write(directory / f"{name}-server.crt", pem_cert(server)),
        server_key=_write(directory / f"{name}-server.key", pem_key(server_key)),
        client_cert=_write(directory / f"{name}-client.crt", pem_cert(client)),
        client_key=_write(directory / f"{name}-client.key", pem_key(client_key)),
        server_name=server_name,
    )
