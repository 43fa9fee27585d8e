"""PoolConfig, URL redaction and client construction (pure logic, no server)."""

from __future__ import annotations

import pytest

from saintpipe.core.config import load_config
from saintpipe.core.errors import ConfigError, InvalidArgument
from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.pool.connection import make_client, redact_url
from saintpipe.services.pool.pool import SubgraphPool


def test_defaults_and_environment_overrides():
    cfg = load_config(
        PoolConfig,
        environ={
            "SAINTPIPE_POOL__CAPACITY": "64",
            "SAINTPIPE_POOL__JOB_ID": "cora-gcn",
            "SAINTPIPE_POOL__VISIBILITY_TIMEOUT": "2.5",
        },
        section="pool",
    )
    assert (cfg.capacity, cfg.job_id, cfg.visibility_timeout) == (64, "cora-gcn", 2.5)
    assert PoolConfig().capacity == 256 and PoolConfig().url is None


def test_dead_letter_settings_default_and_come_from_the_environment():
    assert (PoolConfig().max_deliveries, PoolConfig().dead_letter_limit) == (5, 10_000)
    cfg = load_config(
        PoolConfig,
        environ={"SAINTPIPE_POOL__MAX_DELIVERIES": "0", "SAINTPIPE_POOL__DEAD_LETTER_LIMIT": "50"},
        section="pool",
    )
    assert (cfg.max_deliveries, cfg.dead_letter_limit) == (0, 50)  # 0: no limit


@pytest.mark.parametrize(
    "env, field",
    [
        ({"SAINTPIPE_POOL__CAPACITY": "0"}, "capacity"),
        ({"SAINTPIPE_POOL__JOB_ID": "bad job{x}"}, "job_id"),
        ({"SAINTPIPE_POOL__VISIBILITY_TIMEOUT": "-1"}, "visibility_timeout"),
        ({"SAINTPIPE_POOL__CAPACTY": "3"}, "capacty"),
        ({"SAINTPIPE_POOL__TRANSPORT": "carrier-pigeon"}, "transport"),
        ({"SAINTPIPE_POOL__MAX_DELIVERIES": "-1"}, "max_deliveries"),
        ({"SAINTPIPE_POOL__DEAD_LETTER_LIMIT": "0"}, "dead_letter_limit"),
    ],
)
def test_bad_values_name_the_field(env, field):
    with pytest.raises(ConfigError, match=field):
        load_config(PoolConfig, environ=env, section="pool")


def test_redact_url_hides_the_password_only():
    assert redact_url("redis://:s3cret@127.0.0.1:6379/0") == "redis://:***@127.0.0.1:6379/0"
    assert redact_url("redis://user:s3cret@host:1/2") == "redis://user:***@host:1/2"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_bad_url_scheme_is_a_config_error():
    with pytest.raises(ConfigError, match="scheme must be redis://"):
        make_client("http://127.0.0.1:6379/0")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"job_id": "has space"}, "job_id"),
        ({"job_id": "{tag}"}, "job_id"),
        ({"job_id": "ok", "capacity": 0}, "capacity"),
        ({"job_id": "ok", "visibility_timeout": 0}, "visibility_timeout"),
        ({"job_id": "ok", "max_deliveries": -1}, "max_deliveries"),
        ({"job_id": "ok", "dead_letter_limit": 0}, "dead_letter_limit"),
    ],
)
def test_pool_arguments_are_checked_before_connecting(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        SubgraphPool("redis://127.0.0.1:1/0", **kwargs)


def test_from_config_without_url_is_refused():
    with pytest.raises(InvalidArgument, match="no url"):
        SubgraphPool.from_config(PoolConfig())
