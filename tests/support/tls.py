"""TLS material for tests: a throwaway CA, server and client certificates, written as PEM files.

Generated with the ``cryptography`` package (EC P-256, valid one day), so
tests need no openssl binary and no files in the repository::

    pki = make_pki(tmp_path)
    create_server(data, 0, security=ServerSecurity(tls_cert=pki.server_cert, tls_key=pki.server_key))
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


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


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_pki(directory: Path, name: str = "test", server_name: str = "feature-shard.test") -> Pki:
    """Write a CA, a server and a client certificate (with keys) under ``directory``; file names start with
    ``name`` (two PKIs can share a directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    later = now + dt.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{name} CA")).issuer_name(_name(f"{name} CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common_name: str, usage, sans: list[x509.GeneralName]) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(later)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return _cert_pem(builder.sign(ca_key, hashes.SHA256())), _key_pem(key)

    server_cert, server_key = leaf(server_name, ExtendedKeyUsageOID.SERVER_AUTH, [
        x509.DNSName("localhost"), x509.DNSName(server_name), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ])
    client_cert, client_key = leaf(f"{name} client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return Pki(
        ca_cert=_write(directory / f"{name}-ca.crt", _cert_pem(ca)),
        ca_key=_write(directory / f"{name}-ca.key", _key_pem(ca_key)),
        server_cert=_write(directory / f"{name}-server.crt", server_cert),
        server_key=_write(directory / f"{name}-server.key", server_key),
        client_cert=_write(directory / f"{name}-client.crt", client_cert),
        client_key=_write(directory / f"{name}-client.key", client_key),
        server_name=server_name,
    )
