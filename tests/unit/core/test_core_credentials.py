"""Secrets come from files or the environment, checked; the documented placeholders are refused."""

from __future__ import annotations

import pytest

from saintpipe.core.credentials import (
    REDIS_PASSWORD_FILE_ENV,
    check_ray_token,
    read_secret_file,
    redis_password,
    refuse_placeholder,
)
from saintpipe.core.errors import ConfigError


@pytest.mark.parametrize("value", ["change-me-redis", "change-me-ray-token", " CHANGE-ME-grafana\n"])
def test_the_placeholders_of_env_example_are_refused(value):
    with pytest.raises(ConfigError, match=r"(?i)REDIS_PASSWORD is still the placeholder 'change-me.*openssl rand"):
        refuse_placeholder(value, "REDIS_PASSWORD")


def test_a_real_secret_passes():
    assert refuse_placeholder("3f9c0b1e8a7d", "x") == "3f9c0b1e8a7d"


def test_secret_files_are_read_stripped_and_checked(tmp_path):
    good = tmp_path / "pw"
    good.write_text("s3cret-value\n")
    assert read_secret_file(good, "the Redis password") == "s3cret-value"
    cases = {
        tmp_path / "missing": "not found",
        tmp_path: "not a regular file",
    }
    (tmp_path / "empty").write_text("\n")
    cases[tmp_path / "empty"] = "empty"
    (tmp_path / "latin1").write_bytes(b"caf\xe9")
    cases[tmp_path / "latin1"] = "not UTF-8"
    (tmp_path / "placeholder").write_text("change-me-redis\n")
    cases[tmp_path / "placeholder"] = "placeholder"
    (tmp_path / "big").write_bytes(b"x" * 70_000)
    cases[tmp_path / "big"] = "not a secret file"
    for path, reason in cases.items():
        with pytest.raises(ConfigError) as refused:
            read_secret_file(path, "the Redis password")
        assert f"the Redis password file {path}" in str(refused.value) or "placeholder" in str(refused.value)
        assert reason in str(refused.value), (path, str(refused.value))


def test_the_redis_password_comes_from_the_url_else_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv(REDIS_PASSWORD_FILE_ENV, raising=False)
    assert redis_password("redis://:from%40url@h:6379/0") == "from@url"
    assert redis_password("redis://h:6379/0") is None
    secret = tmp_path / "redis-password"
    secret.write_text("from-file\n")
    monkeypatch.setenv(REDIS_PASSWORD_FILE_ENV, str(secret))
    assert redis_password("redis://h:6379/0") == "from-file"
    with pytest.raises(ConfigError, match="Redis password in the Redis URL is still the placeholder"):
        redis_password("redis://:change-me-redis@h:6379/0")


def test_a_placeholder_ray_token_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", "change-me-ray-token")
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    with pytest.raises(ConfigError, match="RAY_AUTH_TOKEN is still the placeholder"):
        check_ray_token()
    monkeypatch.setenv("RAY_AUTH_TOKEN", "a" * 48)
    check_ray_token()
    token = tmp_path / "token"
    token.write_text("change-me-ray-token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    with pytest.raises(ConfigError, match="placeholder"):
        check_ray_token()


def test_the_sampler_service_refuses_a_placeholder_ray_token_before_joining(tmp_path, monkeypatch):
    from saintpipe.services.sampler_service.config import SamplerServiceConfig
    from saintpipe.services.sampler_service.service import SamplerService

    import ray

    monkeypatch.setenv("RAY_AUTH_TOKEN", "change-me-ray-token")
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    # As in a fresh process (an earlier test of the session may have a Ray running in this one): never joined.
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: pytest.fail(f"joined a cluster: {kwargs}"))
    service = SamplerService(SamplerServiceConfig(data=tmp_path, ray_address="127.0.0.1:1"))
    with pytest.raises(ConfigError, match="RAY_AUTH_TOKEN is still the placeholder"):
        service._connect_ray()


def test_a_url_for_other_hosts_carries_the_file_password(tmp_path, monkeypatch):
    from saintpipe.core.credentials import redis_url_with_password

    secret = tmp_path / "pw"
    secret.write_text("p@ss/word\n")
    monkeypatch.setenv(REDIS_PASSWORD_FILE_ENV, str(secret))
    url = redis_url_with_password("redis://redis:6379/0")
    assert url == "redis://:p%40ss%2Fword@redis:6379/0"
    assert redis_password(url) == "p@ss/word"
    assert redis_url_with_password("redis://:own@redis:6379/0") == "redis://:own@redis:6379/0"
    monkeypatch.delenv(REDIS_PASSWORD_FILE_ENV)
    assert redis_url_with_password("redis://redis:6379/0") == "redis://redis:6379/0"
