"""A pool reaches a password-protected Redis with the password in a file (SAINTPIPE_REDIS_PASSWORD_FILE), not in the
URL; a placeholder password is refused before any connection."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import pytest

from saintpipe.core.credentials import REDIS_PASSWORD_FILE_ENV
from saintpipe.core.errors import AuthenticationFailed, ConfigError
from saintpipe.services.pool.pool import SubgraphPool


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.hostname}:{parts.port}"))


def test_the_password_file_authenticates_a_url_without_credentials(redis_server, tmp_path, monkeypatch):
    secret = tmp_path / "redis-password"
    secret.write_text(redis_server.password + "\n")
    secret.chmod(0o600)
    monkeypatch.setenv(REDIS_PASSWORD_FILE_ENV, str(secret))
    with SubgraphPool(_without_password(redis_server.url), "pwfile", capacity=4) as pool:
        assert pool.stats().depth == 0


def test_a_wrong_password_file_fails_authentication(redis_server, tmp_path, monkeypatch):
    secret = tmp_path / "redis-password"
    secret.write_text("not-the-password")
    monkeypatch.setenv(REDIS_PASSWORD_FILE_ENV, str(secret))
    with pytest.raises(AuthenticationFailed, match="refused the credentials"):
        SubgraphPool(_without_password(redis_server.url), "pwfile", capacity=4)


def test_a_placeholder_password_is_refused_before_connecting(redis_server, monkeypatch):
    monkeypatch.delenv(REDIS_PASSWORD_FILE_ENV, raising=False)
    parts = urlsplit(redis_server.url)
    url = urlunsplit(parts._replace(netloc=f":change-me-redis@{parts.hostname}:{parts.port}"))
    with pytest.raises(ConfigError, match="still the placeholder 'change-me-redis'"):
        SubgraphPool(url, "pwfile", capacity=4)
