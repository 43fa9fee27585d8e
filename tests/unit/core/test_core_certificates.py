"""saintpipe.core.certificates: a CA, server and client certificates that verify, written with safe modes,
kept when still valid, and never written over a directory that is not a bundle."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import stat
import subprocess

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import DNSName, IPAddress, PolicyBuilder, Store, VerificationError

from saintpipe.core import certificates
from saintpipe.core.certificates import (
    bundle_problem,
    load_certificate,
    make_ca,
    make_leaf,
    split_hosts,
    write_bundle,
)
from saintpipe.core.errors import InvalidArgument

HOSTS = ["feature-shard-0", "feature-shard-1", "10.1.2.3"]


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _snapshot(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture
def bundle_dir(tmp_path):
    out = tmp_path / "certs"
    write_bundle(out, HOSTS, days=365, client=True, token=True)
    return out


def _server_verifier(ca: x509.Certificate, name):
    return PolicyBuilder().store(Store([ca])).build_server_verifier(name)


def test_server_certificate_verifies_for_every_host_and_localhost(bundle_dir):
    ca = load_certificate(bundle_dir / "ca.crt")
    server = load_certificate(bundle_dir / "server.crt")
    # The web PKI profile: checks the signature, the SAN match, serverAuth and the CA's constraints.
    for name in [DNSName("feature-shard-0"), DNSName("feature-shard-1"), DNSName("localhost"),
                 IPAddress(ipaddress.ip_address("10.1.2.3")), IPAddress(ipaddress.ip_address("127.0.0.1"))]:
        chain = _server_verifier(ca, name).verify(server, [])
        assert chain[-1] == ca
    with pytest.raises(VerificationError):
        _server_verifier(ca, DNSName("not-a-shard")).verify(server, [])


def test_openssl_verifies_the_chain_and_each_purpose(bundle_dir):
    def verify(purpose: str, cert: str) -> subprocess.CompletedProcess:
        return subprocess.run(["openssl", "verify", "-purpose", purpose, "-CAfile", str(bundle_dir / "ca.crt"),
                               str(bundle_dir / cert)], capture_output=True, text=True, check=False)

    assert verify("sslserver", "server.crt").returncode == 0
    assert verify("sslclient", "client.crt").returncode == 0
    # The EKU confines each certificate to its role.
    assert verify("sslclient", "server.crt").returncode != 0
    assert verify("sslserver", "client.crt").returncode != 0


def test_a_leaf_of_another_ca_does_not_verify(bundle_dir, tmp_path):
    write_bundle(tmp_path / "other", HOSTS, days=365)
    other_ca = load_certificate(tmp_path / "other" / "ca.crt")
    with pytest.raises(VerificationError):
        _server_verifier(other_ca, DNSName("localhost")).verify(load_certificate(bundle_dir / "server.crt"), [])
    assert not certificates.signed_by(load_certificate(bundle_dir / "server.crt"), other_ca)


def test_extensions_of_ca_server_and_client(bundle_dir):
    ca, server, client = (load_certificate(bundle_dir / n) for n in ("ca.crt", "server.crt", "client.crt"))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    for leaf, purpose in ((server, ExtendedKeyUsageOID.SERVER_AUTH), (client, ExtendedKeyUsageOID.CLIENT_AUTH)):
        assert leaf.issuer == ca.subject
        basic = leaf.extensions.get_extension_for_class(x509.BasicConstraints)
        assert basic.critical and basic.value.ca is False
        usage = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
        assert usage.digital_signature and not usage.key_cert_sign and not usage.key_encipherment
        assert list(leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [purpose]
        assert leaf.public_key().curve.name == "secp256r1"


def test_server_san_holds_the_hosts_plus_localhost(bundle_dir):
    dns, ips = certificates.alt_names(load_certificate(bundle_dir / "server.crt"))
    assert dns == ["feature-shard-0", "feature-shard-1", "localhost"]
    assert ips == ["10.1.2.3", "127.0.0.1"]


def test_file_modes_keys_and_token_private(bundle_dir):
    assert _mode(bundle_dir) == 0o700
    for name in ("ca.key", "server.key", "client.key", "token"):
        assert _mode(bundle_dir / name) == 0o600, name
    for name in ("ca.crt", "server.crt", "client.crt"):
        assert _mode(bundle_dir / name) == 0o644, name
    token = (bundle_dir / "token").read_text().strip()
    assert len(token) == 64 and int(token, 16) >= 0
    assert sorted(p.name for p in bundle_dir.iterdir()) == sorted(certificates.BUNDLE_FILES)  # no temp files left


def test_two_bundles_have_different_keys_and_tokens(bundle_dir, tmp_path):
    other = tmp_path / "other"
    write_bundle(other, HOSTS, days=365, client=True, token=True)
    for name in ("ca.key", "server.key", "client.key", "token"):
        assert (bundle_dir / name).read_bytes() != (other / name).read_bytes()


def test_keep_existing_keeps_a_valid_bundle_unchanged(bundle_dir):
    before = _snapshot(bundle_dir)
    result = write_bundle(bundle_dir, ["feature-shard-1"], days=365, client=True, token=True, keep_existing=True)
    assert result.kept and result.written == ()
    assert _snapshot(bundle_dir) == before


def test_keep_existing_regenerates_an_expiring_bundle_only_with_force(tmp_path):
    out = tmp_path / "certs"
    write_bundle(out, HOSTS, days=10)
    before = _snapshot(out)
    assert "expires" in bundle_problem(out, *split_hosts(HOSTS), client=False, token=False)
    with pytest.raises(InvalidArgument, match=r"cannot be kept: ca\.crt expires .* within 30 days; pass --force"):
        write_bundle(out, HOSTS, days=365, keep_existing=True)
    assert _snapshot(out) == before
    result = write_bundle(out, HOSTS, days=365, keep_existing=True, force=True)
    assert not result.kept and _snapshot(out) != before
    after = load_certificate(out / "server.crt").not_valid_after_utc
    assert after - dt.datetime.now(dt.UTC) > dt.timedelta(days=300)


@pytest.mark.parametrize("case", ["uncovered host", "missing client", "missing token", "foreign server cert"])
def test_keep_existing_does_not_keep_a_bundle_that_does_not_fit(bundle_dir, tmp_path, case):
    hosts, client, token = HOSTS, True, True
    if case == "uncovered host":
        hosts = [*HOSTS, "feature-shard-2"]
    elif case == "missing client":
        (bundle_dir / "client.key").unlink()
    elif case == "missing token":
        (bundle_dir / "token").unlink()
    else:
        write_bundle(tmp_path / "other", HOSTS, days=365)
        for name in ("server.crt", "server.key"):
            (bundle_dir / name).write_bytes((tmp_path / "other" / name).read_bytes())
    before = _snapshot(bundle_dir)
    with pytest.raises(InvalidArgument, match="cannot be kept"):
        write_bundle(bundle_dir, hosts, days=365, client=client, token=token, keep_existing=True)
    assert _snapshot(bundle_dir) == before


def test_an_existing_bundle_is_refused_without_a_flag(bundle_dir):
    before = _snapshot(bundle_dir)
    with pytest.raises(InvalidArgument, match="already holds a certificate bundle; pass --keep-existing"):
        write_bundle(bundle_dir, HOSTS, days=365)
    assert _snapshot(bundle_dir) == before


def test_force_refuses_a_directory_that_is_not_a_bundle_and_leaves_its_files(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    (home / "server.key").write_text("someone else's key")  # a bundle's file name, but no ca.crt
    before = _snapshot(home)
    for keep in (False, True):
        with pytest.raises(InvalidArgument, match=r"not a saintpipe certificate bundle .*even with --force"):
            write_bundle(home, HOSTS, days=365, keep_existing=keep, force=True)
    assert _snapshot(home) == before


def test_force_replaces_only_bundle_files(bundle_dir):
    (bundle_dir / "README").write_text("operator notes")
    old_ca = (bundle_dir / "ca.crt").read_bytes()
    result = write_bundle(bundle_dir, HOSTS, days=365, force=True)
    assert (bundle_dir / "README").read_text() == "operator notes"
    assert (bundle_dir / "ca.crt").read_bytes() != old_ca
    # The old client pair and token were issued by the replaced CA: removed, and said so.
    assert {p.name for p in result.removed} == {"client.crt", "client.key", "token"}
    assert not (bundle_dir / "client.key").exists()


def test_a_failed_write_leaves_the_old_bundle_whole(bundle_dir, monkeypatch):
    before = _snapshot(bundle_dir)
    real_stage = certificates.stage
    calls = []

    def failing_stage(path, data, mode, **names):
        calls.append(path.name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real_stage(path, data, mode, **names)

    monkeypatch.setattr(certificates, "stage", failing_stage)
    with pytest.raises(OSError):
        write_bundle(bundle_dir, HOSTS, days=365, client=True, token=True, force=True)
    assert _snapshot(bundle_dir) == before  # every file staged before any is renamed; temporaries removed


def test_leftover_temporary_files_do_not_block_a_new_bundle(tmp_path):
    out = tmp_path / "certs"
    out.mkdir()
    (out / ".ca.key.tmp-abc123").write_bytes(b"half")
    write_bundle(out, HOSTS, days=30)
    assert (out / "ca.crt").is_file()


@pytest.mark.parametrize("host", ["a b", "*.example.com", "https://shard", "shard:50051", "", "-shard", "shard-",
                                  "shärd", "a" * 64, "x/y", "shard\n", "a..b"])
def test_hostile_host_names_are_refused(tmp_path, host):
    with pytest.raises(InvalidArgument, match=r"--host .*not a host name or IP address"):
        write_bundle(tmp_path / "certs", [host], days=365)
    assert not (tmp_path / "certs").exists()


def test_host_names_are_normalised_and_deduplicated():
    dns, ips = split_hosts(["Shard-0.", "shard-0", "::1", "127.0.0.1", "feature_shard"])
    assert dns == ["shard-0", "feature_shard", "localhost"]
    assert ips == ["::1", "127.0.0.1"]


def test_too_many_hosts_are_refused():
    with pytest.raises(InvalidArgument, match="at most 100"):
        split_hosts([f"h{i}" for i in range(101)])


@pytest.mark.parametrize("days", [0, -1, 3651, True, 1.5])
def test_days_out_of_range_are_refused(tmp_path, days):
    with pytest.raises(InvalidArgument, match=r"--days .*from 1 to 3650"):
        write_bundle(tmp_path / "certs", HOSTS, days=days)


def test_a_file_at_out_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidArgument, match="exists and is not a directory"):
        write_bundle(tmp_path / "file", HOSTS, days=365, force=True)


def test_leaf_validity_never_outlives_its_ca():
    ca_key, ca_cert = make_ca("test CA", 10)
    _, leaf = make_leaf(ca_key, ca_cert, "leaf", ["localhost"], [], 365)
    assert leaf.not_valid_after_utc <= ca_cert.not_valid_after_utc


def test_describe_bundle_reports_each_certificate(bundle_dir, tmp_path):
    infos = {i.path.name: i for i in certificates.describe_bundle(bundle_dir)}
    assert list(infos) == ["ca.crt", "server.crt", "client.crt"]
    assert infos["server.crt"].purpose == "server" and infos["client.crt"].purpose == "client"
    assert infos["ca.crt"].purpose == "CA" and infos["ca.crt"].signed_by_ca is None
    assert infos["server.crt"].signed_by_ca and "10.1.2.3" in infos["server.crt"].ip_addresses
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidArgument, match="holds no ca.crt"):
        certificates.describe_bundle(tmp_path / "empty")


def test_garbage_and_huge_files_are_named_not_parsed(tmp_path):
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(InvalidArgument, match=r"ca\.crt: not a PEM certificate"):
        certificates.describe_bundle(tmp_path)
    (tmp_path / "ca.crt").write_bytes(b"x" * (certificates.MAX_PEM_BYTES + 1))
    with pytest.raises(InvalidArgument, match=r"ca\.crt: larger than 1 MiB"):
        load_certificate(tmp_path / "ca.crt")


def test_keep_existing_does_not_keep_an_empty_token(bundle_dir):
    (bundle_dir / "token").write_text("\n")
    assert bundle_problem(bundle_dir, *split_hosts(HOSTS), client=True, token=True) == "token is empty"
