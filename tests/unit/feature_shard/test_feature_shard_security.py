"""Feature-shard security settings: bad files and tokens are one-line ConfigErrors naming the setting.

The token check (constant-time, on hashes) is tested here on its own; the
real TLS channels and servers are in tests/integration/feature_shard/test_feature_shard_tls.py.
"""

from __future__ import annotations

import hashlib

import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.services.feature_shard.auth import bearer_matches
from saintpipe.services.feature_shard.config import FeatureShardConfig
from saintpipe.services.feature_shard.security import TOKEN_ENV, ClientSecurity, ServerSecurity
from saintpipe.trainer.config import TrainerConfig
from tests.support.tls import make_pki

GOOD = "0123456789abcdef0123"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _shard(tmp_path, **fields) -> FeatureShardConfig:
    return FeatureShardConfig(data=tmp_path, shard=0, **fields)


@pytest.mark.parametrize(
    "token, problem",
    [
        ("", "the feature-shard token is empty"),
        ("short-token", "has 11 characters, fewer than 16"),
        ("change-me-before-deploying", "still the 'change-me' placeholder"),
        ("CHANGE-ME-0123456789", "still the 'change-me' placeholder"),
        ("0123456789 abcdef0123", "characters other than visible ASCII"),
    ],
)
def test_bad_tokens_are_refused_without_echoing_them(tmp_path, token, problem):
    path = tmp_path / "token"
    path.write_text(token + "\n")
    with pytest.raises(ConfigError) as err:
        _shard(tmp_path, token_file=path).security(environ={}).load()
    message = str(err.value)
    assert message.startswith(f"feature_shard.token_file (--token-file) {path}: ") and problem in message
    assert "\n" not in message and (not token or token not in message)
    with pytest.raises(ConfigError, match=f"environment variable {TOKEN_ENV}: .*{problem}"):
        _shard(tmp_path).security(environ={TOKEN_ENV: token}).load()


def test_the_token_comes_from_the_file_else_the_environment(tmp_path):
    path = tmp_path / "token"
    path.write_text(f"  {GOOD}\n")
    assert _shard(tmp_path, token_file=path).security(environ={TOKEN_ENV: "x" * 20}).load().token == GOOD
    assert _shard(tmp_path).security(environ={TOKEN_ENV: GOOD}).load().token == GOOD
    assert _shard(tmp_path).security(environ={}).load().token is None
    with pytest.raises(ConfigError, match=f"token_file .*{tmp_path / 'gone'}: cannot read it"):
        _shard(tmp_path, token_file=tmp_path / "gone").security(environ={}).load()


def test_tls_files_missing_unreadable_or_not_pem_name_the_setting_and_file(tmp_path, pki):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    cases = [
        (dict(tls_cert=tmp_path / "no.crt", tls_key=pki.server_key), "feature_shard.tls_cert (--tls-cert)",
         "cannot read it (No such file or directory)"),
        (dict(tls_cert=junk, tls_key=pki.server_key), "feature_shard.tls_cert (--tls-cert)", "not a PEM certificate"),
        (dict(tls_cert=pki.server_cert, tls_key=pki.server_cert), "feature_shard.tls_key (--tls-key)",
         "not a PEM private key"),
        (dict(tls_cert=pki.server_cert, tls_key=pki.server_key, tls_client_ca=tmp_path),
         "feature_shard.tls_client_ca (--tls-client-ca)", "cannot read it"),
    ]
    for fields, label, problem in cases:
        with pytest.raises(ConfigError) as err:
            _shard(tmp_path, **fields).security(environ={}).load()
        assert str(err.value).startswith(label) and problem in str(err.value), str(err.value)
    with pytest.raises(ConfigError, match=r"tls_cert \(--tls-cert\) is set but feature_shard.tls_key .* is not"):
        _shard(tmp_path, tls_cert=pki.server_cert).security(environ={}).load()
    with pytest.raises(ConfigError, match=r"tls_client_ca \(--tls-client-ca\) needs"):
        _shard(tmp_path, tls_client_ca=pki.ca_cert).security(environ={}).load()
    loaded = _shard(tmp_path, tls_cert=pki.server_cert, tls_key=pki.server_key, tls_client_ca=pki.ca_cert)
    assert loaded.security(environ={}).load().describe() == "TLS with client certificates (mTLS), no token"


def test_the_trainer_settings_name_their_flags(tmp_path, pki, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"^trainer.feature_tls_ca \(--feature-tls-ca\) .*cannot read it"):
        TrainerConfig(feature_tls_ca=tmp_path / "ca.crt").feature_security().load()
    with pytest.raises(ConfigError, match=r"trainer.feature_tls_server_name .* needs trainer.feature_tls_ca"):
        TrainerConfig(feature_tls_server_name="shard.test").feature_security().load()
    monkeypatch.setenv(TOKEN_ENV, GOOD)
    channel = TrainerConfig(feature_tls_ca=pki.ca_cert).feature_security().load()
    assert channel.credentials is not None and channel.has_token and channel.metadata is None  # a call credential
    plain = TrainerConfig().feature_security().load()
    assert plain.credentials is None and plain.metadata == (("authorization", f"Bearer {GOOD}"),)
    assert GOOD not in repr(TrainerConfig().feature_security())  # a SecretStr: never in a log line


def test_client_settings_that_need_tls(tmp_path, pki):
    with pytest.raises(ConfigError, match="tls_cert is set but tls_key is not"):
        ClientSecurity(tls_ca=pki.ca_cert, tls_cert=pki.client_cert).load()
    assert ClientSecurity(tls_ca=pki.ca_cert, tls_server_name="x.test").load().options == (
        ("grpc.ssl_target_name_override", "x.test"),
    )
    assert ServerSecurity().load().credentials is None and ServerSecurity().load().token is None


def test_bearer_check_takes_the_first_authorization_entry_only():
    expected = hashlib.sha256(f"Bearer {GOOD}".encode()).digest()
    assert bearer_matches((("authorization", f"Bearer {GOOD}"),), expected)
    assert not bearer_matches((("authorization", f"Bearer {GOOD}x"),), expected)
    assert not bearer_matches((("authorization", GOOD),), expected)
    assert not bearer_matches((("x-token", f"Bearer {GOOD}"),), expected)
    assert not bearer_matches((("authorization", "Bearer wrong"), ("authorization", f"Bearer {GOOD}")), expected)
    assert not bearer_matches(None, expected)
