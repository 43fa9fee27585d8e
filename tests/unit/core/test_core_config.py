from pathlib import Path

import pydantic
import pytest

from saintpipe.core.config import StrictModel, env_overrides, load_config
from saintpipe.core.errors import ConfigError


class Pool(StrictModel):
    capacity: int = pydantic.Field(64, ge=1)
    url: str = ""


class Root(StrictModel):
    pool: Pool = Pool()
    name: str = "x"


def test_precedence_defaults_file_env_flags(tmp_path: Path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('name = "file"\n[pool]\ncapacity = 8\nurl = "redis://file"\n')
    env = {"SAINTPIPE_POOL__CAPACITY": "16"}
    got = load_config(Root, cfg, flags={"name": "flag", "pool": {"url": None}}, environ=env)
    assert got.name == "flag"
    assert got.pool.capacity == 16
    assert got.pool.url == "redis://file"


def test_section_and_yaml(tmp_path: Path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pool:\n  capacity: 3\n")
    assert load_config(Pool, cfg, section="pool", environ={}).capacity == 3


def test_bad_field_names_file_and_field(tmp_path: Path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[pool]\ncapacity = 0\n")
    with pytest.raises(ConfigError) as err:
        load_config(Root, cfg, environ={})
    assert str(cfg) in str(err.value) and "pool.capacity" in str(err.value)


def test_unknown_key_rejected(tmp_path: Path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"pool": {"capacityy": 3}}')
    with pytest.raises(ConfigError, match="capacityy"):
        load_config(Root, cfg, environ={})


def test_env_parsing():
    assert env_overrides({"SAINTPIPE_A__B": "3", "SAINTPIPE_A__C": "text", "OTHER": "1"}) == {"a": {"b": 3, "c": "text"}}
