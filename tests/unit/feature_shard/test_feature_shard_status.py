"""Status codes <-> typed errors, and the feature-shard config model."""

from __future__ import annotations

import grpc
import pytest

from saintpipe.core import errors
from saintpipe.core.config import load_config
from saintpipe.core.grpc_status import error_from_rpc_error
from saintpipe.services.feature_shard.config import SECTION, FeatureShardConfig


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(
    "error",
    [
        errors.InvalidArgument,
        errors.DatasetError,
        errors.DecodeError,
        errors.ServiceUnavailable,
        errors.SaintpipeTimeout,
    ],
)
def test_every_error_survives_the_round_trip(error):
    code = error("x").grpc_status_code()
    back = error_from_rpc_error(FakeRpcError(code, "node id 7 is bad"), "feature shard 1 at h:1")
    assert type(back) is error
    assert str(back) == f"feature shard 1 at h:1: node id 7 is bad ({code.name})"


def test_unknown_codes_stay_saintpipe_errors():
    back = error_from_rpc_error(FakeRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "too big"), "here")
    assert type(back) is errors.SaintpipeError and "RESOURCE_EXHAUSTED" in str(back)


def test_config_precedence_and_errors(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[feature_shard]\ndata = "/data/demo"\nshard = 1\nport = 6000\n')
    env = {"SAINTPIPE_FEATURE_SHARD__PORT": "7000", "SAINTPIPE_FEATURE_SHARD__METRICS_PORT": "9100"}
    cfg = load_config(
        FeatureShardConfig, path, flags={"host": "0.0.0.0", "shard": None}, environ=env, section=SECTION
    )
    assert (str(cfg.data), cfg.shard, cfg.host, cfg.port, cfg.metrics_port) == (
        "/data/demo",
        1,
        "0.0.0.0",
        7000,
        9100,
    )
    with pytest.raises(errors.ConfigError, match="shard"):
        load_config(FeatureShardConfig, flags={"data": "/d", "shard": -1}, environ={}, section=SECTION)
    with pytest.raises(errors.ConfigError, match="max_message_bytes"):
        load_config(
            FeatureShardConfig,
            flags={"data": "/d", "shard": 0, "max_message_bytes": 10},
            environ={},
            section=SECTION,
        )


def test_tune_malloc_applies_on_glibc():
    import platform

    from saintpipe.core.malloc import tune_malloc

    assert tune_malloc() == (platform.libc_ver()[0] == "glibc")
