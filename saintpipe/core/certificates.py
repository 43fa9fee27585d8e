"""TLS material for the feature shards: a private CA, a server certificate, an optional client certificate and token.

Pure functions over the ``cryptography`` package; ``saintpipe certs`` is a thin
layer over them, and so is the compose stack's one-shot service::

    bundle = write_bundle("certs", ["feature-shard-0", "feature-shard-1"], days=365, client=True, token=True)
    # certs/: ca.crt, server.crt, client.crt (0644); ca.key, server.key, client.key, token (0600)

Every key is EC P-256. Files are replaced one by one (temporary file, then ``os.replace``), never by swapping
the directory, so the directory may be a mount point (a compose volume) and files that are not the bundle's
are never touched. ``--force`` replaces only a directory that already holds a bundle.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from saintpipe.core.files import TooLarge, read_capped, stage
from saintpipe.core.errors import InvalidArgument

CA_CERT, CA_KEY = "ca.crt", "ca.key"
SERVER_CERT, SERVER_KEY = "server.crt", "server.key"
CLIENT_CERT, CLIENT_KEY = "client.crt", "client.key"
TOKEN = "token"
BUNDLE_FILES = (CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY, CLIENT_CERT, CLIENT_KEY, TOKEN)
CERT_FILES = (CA_CERT, SERVER_CERT, CLIENT_CERT)
PUBLIC_MODE, SECRET_MODE, DIR_MODE = 0o644, 0o600, 0o700
# Always in the server's SAN: health checks and local clients dial localhost.
DEFAULT_HOSTS = ("localhost", "127.0.0.1")
MAX_DAYS = 3650
RENEW_WITHIN = dt.timedelta(days=30)
MAX_HOSTS = 100
MAX_PEM_BYTES = 1 << 20
# Backdated a little so a peer whose clock is slightly behind accepts a fresh certificate.
CLOCK_SKEW = dt.timedelta(minutes=5)
_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")  # used with fullmatch: "$" would let "x\n" in

Key = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Bundle:
    """The outcome of :func:`write_bundle`.

    Attributes:
        directory: the bundle's directory.
        written: the files written by this call (empty when the bundle was kept).
        removed: files of an older bundle that the new one no longer has (``--force`` without ``--client``).
        kept: whether an existing, valid bundle was kept unchanged.
        expires: when the server certificate expires.
    """

    directory: Path
    written: tuple[Path, ...]
    removed: tuple[Path, ...]
    kept: bool
    expires: dt.datetime


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _check_days(days: int) -> None:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise InvalidArgument(f"--days {days!r}: must be a whole number of days from 1 to {MAX_DAYS}")


def make_ca(common_name: str, days: int) -> tuple[Key, x509.Certificate]:
    """A self-signed CA that may sign leaf certificates only (path length 0).

    Returns:
        ``(key, certificate)``, valid for ``days`` days from now.
    """
    _check_days(days)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(_name(common_name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW).not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_leaf(ca_key: Key, ca_cert: x509.Certificate, common_name: str, dns_names: list[str],
              ip_addresses: list[str], days: int, client: bool = False) -> tuple[Key, x509.Certificate]:
    """A server (or, with ``client=True``, a client) certificate signed by the CA.

    Args:
        ca_key, ca_cert: the signing CA (see :func:`make_ca`).
        common_name: the subject's CN (peers check the SAN, not this).
        dns_names, ip_addresses: the subjectAltName entries; a client certificate may have none.
        days: validity from now; capped at the CA's expiry, which a chain cannot outlive.
        client: clientAuth instead of serverAuth extended key usage.

    Raises:
        InvalidArgument: ``days`` is out of range, or an IP address does not parse.
    """
    _check_days(days)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    alt_names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    try:
        alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    except ValueError as exc:
        raise InvalidArgument(f"--host: {exc}") from None
    # EC keys sign (ECDHE); keyEncipherment is for RSA key transport and does not apply.
    usage = x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                          encipher_only=False, decipher_only=False)
    purpose = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def split_hosts(hosts: list[str]) -> tuple[list[str], list[str]]:
    """Validate ``--host`` values and split them into DNS names and IP addresses, with localhost and 127.0.0.1 added.

    Raises:
        InvalidArgument: a value is neither an IP address nor a host name (naming the value).
    """
    if len(hosts) > MAX_HOSTS:
        raise InvalidArgument(f"--host: {len(hosts)} given; at most {MAX_HOSTS}")
    dns: list[str] = []
    ips: list[str] = []
    for host in [*hosts, *DEFAULT_HOSTS]:
        try:
            ip = str(ipaddress.ip_address(host))
        except ValueError:
            name = host.lower().rstrip(".") if isinstance(host, str) else ""
            if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
                raise InvalidArgument(f"--host {host!r}: not a host name or IP address (letters, digits, '-', "
                                      "'_' and dots; no wildcards, ports or URLs)") from None
            if name not in dns:
                dns.append(name)
        else:
            if ip not in ips:
                ips.append(ip)
    return dns, ips


def pem_key(key: Key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _read_pem(path: Path) -> bytes:
    """A PEM (or token) file's bytes; a file of another kind may be anything, so at most 1 MiB is read."""
    try:
        return read_capped(path, MAX_PEM_BYTES)
    except OSError as exc:
        raise InvalidArgument(f"{path}: cannot read: {exc.strerror}") from None
    except TooLarge:
        raise InvalidArgument(f"{path}: larger than 1 MiB; not a PEM file") from None


def load_certificate(path: Path) -> x509.Certificate:
    """Read one PEM certificate.

    Raises:
        InvalidArgument: the file is missing, too large or not a PEM certificate (naming it).
    """
    data = _read_pem(path)  # outside the try: its InvalidArgument is a ValueError too
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError:
        raise InvalidArgument(f"{path}: not a PEM certificate") from None


def _load_key(path: Path) -> Key:
    data = _read_pem(path)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise InvalidArgument(f"{path}: not an unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise InvalidArgument(f"{path}: not an EC private key")
    return key


def _same_key(key: Key, cert: x509.Certificate) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return key.public_key().public_bytes(*fmt) == cert.public_key().public_bytes(*fmt)


def alt_names(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    """The certificate's subjectAltName DNS names and IP addresses (empty lists without the extension)."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return san.get_values_for_type(x509.DNSName), [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether ``ca`` issued ``cert`` (its name and its signature)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def bundle_problem(directory: Path, dns: list[str], ips: list[str], client: bool, token: bool) -> str | None:
    """Why the bundle in ``directory`` cannot be kept for these hosts, or ``None`` when it can.

    Kept only when complete (including the client pair and token asked for), each
    key matches its certificate, the leaves are signed by ``ca.crt``, the server
    certificate covers every host, and no certificate expires within 30 days.
    """
    pairs = [(CA_CERT, CA_KEY), (SERVER_CERT, SERVER_KEY)] + ([(CLIENT_CERT, CLIENT_KEY)] if client else [])
    for name in [n for pair in pairs for n in pair] + ([TOKEN] if token else []):
        if not (directory / name).is_file():
            return f"{name} is missing"
    try:
        certs = {c: load_certificate(directory / c) for c, _ in pairs}
        for cert_name, key_name in pairs:
            if not _same_key(_load_key(directory / key_name), certs[cert_name]):
                return f"{key_name} does not match {cert_name}"
        if token and not _read_pem(directory / TOKEN).strip():
            return f"{TOKEN} is empty"
    except InvalidArgument as exc:
        return str(exc)
    for cert_name, cert in certs.items():
        if cert_name != CA_CERT and not signed_by(cert, certs[CA_CERT]):
            return f"{cert_name} is not signed by {CA_CERT}"
        if cert.not_valid_after_utc - _now() < RENEW_WITHIN:
            return f"{cert_name} expires {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, within 30 days"
    have_dns, have_ips = alt_names(certs[SERVER_CERT])
    missing = [h for h in dns if h not in have_dns] + [ip for ip in ips if ip not in have_ips]
    if missing:
        return f"{SERVER_CERT} does not cover {', '.join(missing)}"
    return None


def _holds_bundle(directory: Path) -> bool:
    """A saintpipe bundle is recognised by a readable ``ca.crt`` of a CA."""
    try:
        ca = load_certificate(directory / CA_CERT)
        return bool(ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except (InvalidArgument, x509.ExtensionNotFound):
        return False


def _foreign_entries(directory: Path) -> list[str]:
    """Entries that are neither bundle files nor temporary files a crashed run of ours left."""
    ours = tuple(f".{name}.tmp-" for name in BUNDLE_FILES)
    return sorted(e.name for e in directory.iterdir() if e.name not in BUNDLE_FILES and not e.name.startswith(ours))


def _write_files(directory: Path, contents: dict[str, tuple[bytes, int]]) -> None:
    """Write every file to a temporary name first, then rename each into place."""
    staged: dict[str, Path] = {}
    try:
        for name, (data, mode) in contents.items():
            # Created 0600 (mkstemp), then given its mode: a key is never readable by others.
            staged[name] = stage(directory / name, data, mode, prefix=f".{name}.tmp-", suffix="")
        for name, tmp in staged.items():
            os.replace(tmp, directory / name)
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _check_target(out: Path, keep_existing: bool, force: bool) -> bool:
    """Refuse a target that must not be written; returns whether it holds a bundle."""
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"--out {out}: exists and is not a directory")
    if not out.exists():
        return False
    if _holds_bundle(out):
        if not (keep_existing or force):
            raise InvalidArgument(f"--out {out}: already holds a certificate bundle; pass --keep-existing to keep "
                                  "it if still valid, or --force to replace it")
        return True
    foreign = _foreign_entries(out)
    if foreign:
        raise InvalidArgument(f"--out {out}: holds files that are not a saintpipe certificate bundle "
                              f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); refusing to "
                              "write there, even with --force; choose an empty or new directory")
    return False


def write_bundle(out_dir: Path | str, hosts: list[str], days: int = 365, client: bool = False, token: bool = False,
                 keep_existing: bool = False, force: bool = False) -> Bundle:
    """Create (or keep) a certificate bundle in ``out_dir``.

    Args:
        out_dir: the directory; created 0700 with its parents when missing.
        hosts: names and IP addresses clients dial the shards by (localhost and 127.0.0.1 are always added).
        days: validity of every certificate (1 to 3650).
        client: also write ``client.crt``/``client.key`` (for shards that require client certificates).
        token: also write ``token``: 32 random bytes as hex, the shared secret of ``--token-file``.
        keep_existing: keep a bundle already there if it is complete, covers ``hosts`` and does not
            expire within 30 days; otherwise replace it only with ``force``.
        force: replace an existing bundle. Never writes into a directory holding other files.

    Returns:
        The :class:`Bundle`, telling which files were written, or that the old bundle was kept.

    Raises:
        InvalidArgument: a bad host or ``days``, or a target that may not be written (the message says why).
    """
    _check_days(days)
    out = Path(out_dir)
    dns, ips = split_hosts(list(hosts))
    if _check_target(out, keep_existing, force) and keep_existing:
        problem = bundle_problem(out, dns, ips, client, token)
        if problem is None:
            expires = load_certificate(out / SERVER_CERT).not_valid_after_utc
            return Bundle(out, (), (), True, expires)
        if not force:
            raise InvalidArgument(f"--out {out}: the existing bundle cannot be kept: {problem}; pass --force "
                                  "to replace it")
    out.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)

    ca_key, ca_cert = make_ca(f"saintpipe CA {secrets.token_hex(4)}", days)
    server_key, server_cert = make_leaf(ca_key, ca_cert, "saintpipe feature shard", dns, ips, days)
    # Certificates are public (0644, readable by a shard running as another user); keys and the token are not.
    contents = {CA_CERT: (pem_cert(ca_cert), PUBLIC_MODE), CA_KEY: (pem_key(ca_key), SECRET_MODE),
                SERVER_CERT: (pem_cert(server_cert), PUBLIC_MODE), SERVER_KEY: (pem_key(server_key), SECRET_MODE)}
    if client:
        client_key, client_cert = make_leaf(ca_key, ca_cert, "saintpipe client", [], [], days, client=True)
        contents[CLIENT_CERT] = (pem_cert(client_cert), PUBLIC_MODE)
        contents[CLIENT_KEY] = (pem_key(client_key), SECRET_MODE)
    if token:
        contents[TOKEN] = ((secrets.token_hex(32) + "\n").encode(), SECRET_MODE)
    _write_files(out, contents)
    # Leftovers of an older bundle would be signed by the CA just replaced: useless, and misleading.
    removed = tuple(out / n for n in BUNDLE_FILES if n not in contents and (out / n).is_file())
    for path in removed:
        path.unlink()
    return Bundle(out, tuple(out / n for n in contents), removed, False, server_cert.not_valid_after_utc)


@dataclass(frozen=True)
class CertificateInfo:
    """What ``saintpipe certs show`` prints about one certificate."""

    path: Path
    subject: str
    issuer: str
    dns_names: list[str]
    ip_addresses: list[str]
    purpose: str
    not_before: dt.datetime
    not_after: dt.datetime
    signed_by_ca: bool | None


def _purpose(cert: x509.Certificate) -> str:
    try:
        if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            return "CA"
    except x509.ExtensionNotFound:
        pass
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return "any"
    known = {ExtendedKeyUsageOID.SERVER_AUTH: "server", ExtendedKeyUsageOID.CLIENT_AUTH: "client"}
    return ", ".join(known.get(oid, oid.dotted_string) for oid in usages)


def describe_bundle(directory: Path | str) -> list[CertificateInfo]:
    """Describe each of ``ca.crt``, ``server.crt`` and ``client.crt`` found in ``directory``.

    Raises:
        InvalidArgument: ``directory`` holds none of them, or one is not a PEM certificate.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InvalidArgument(f"{directory}: not a directory")
    present = [directory / name for name in CERT_FILES if (directory / name).is_file()]
    if not present:
        raise InvalidArgument(f"{directory}: holds no {', '.join(CERT_FILES)}; not a certificate bundle")
    ca = load_certificate(directory / CA_CERT) if (directory / CA_CERT).is_file() else None
    infos = []
    for path in present:
        cert = load_certificate(path)
        dns, ips = alt_names(cert)
        infos.append(CertificateInfo(
            path=path, subject=cert.subject.rfc4514_string(), issuer=cert.issuer.rfc4514_string(),
            dns_names=dns, ip_addresses=ips, purpose=_purpose(cert), not_before=cert.not_valid_before_utc,
            not_after=cert.not_valid_after_utc,
            signed_by_ca=None if ca is None or path.name == CA_CERT else signed_by(cert, ca)))
    return infos
