import json
import types
import typing
from pathlib import Path

import annotated_types
import pydantic
import pytest

from saintpipe.core import config as config_module
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


# Hostile config files and environment values (issue 19, finding 4): one line naming the file or variable.


def _error(path: Path, **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(Root, path, environ={}, **kwargs)
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_not_utf8_names_file_offset_and_line(tmp_path: Path):
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(b"pool:\n  url: caf\xe9\n")
    assert _error(cfg) == (f"{cfg}: not UTF-8 text: byte 0xe9 at offset 16 (line 2) cannot be decoded; "
                           "save the file as UTF-8")


def test_byte_order_mark_is_not_content(tmp_path: Path):
    cfg = tmp_path / "c.json"
    cfg.write_bytes(b'\xef\xbb\xbf{"pool": {"capacity": 5}}')
    assert load_config(Root, cfg, environ={}).pool.capacity == 5


@pytest.mark.parametrize("name,text,expected", [
    ("c.yaml", "pool:\n  capacity: [1, 2\n", "not valid YAML at line 3, column 1: expected ',' or ']'"),
    ("c.yaml", "pool: {\n", "not valid YAML at line 2, column 1"),
    ("c.toml", "[pool\n", "not valid TOML: Expected ']' at the end of a table declaration (at line 1, column 6)"),
    ("c.json", '{"pool": }', "not valid JSON: Expecting value at line 1, column 10"),
    ("c.json", "[" * 100_000, "values nested too deeply to parse"),
    ("c.yaml", "- 1\n- 2\n", "top level must be a table/mapping, got list"),
    ("c.ini", "x = 1\n", "unknown config format '.ini'"),
])
def test_unparsable_file_is_one_line_with_the_place(tmp_path: Path, name, text, expected):
    cfg = tmp_path / name
    cfg.write_text(text)
    message = _error(cfg)
    assert message.startswith(f"{cfg}: ") and expected in message, message


def test_directory_missing_and_oversized_files(tmp_path: Path, monkeypatch):
    assert _error(tmp_path) == f"{tmp_path}: is a directory, not a config file"
    assert _error(tmp_path / "none.toml") == f"{tmp_path / 'none.toml'}: config file not found"
    assert _error(tmp_path / "f.toml" / "x.toml") == f"{tmp_path / 'f.toml' / 'x.toml'}: config file not found"
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (2**20 + 1))  # a comment: valid TOML, refused for its size alone
    monkeypatch.setattr(config_module, "MAX_CONFIG_BYTES", 2**20)
    assert _error(big) == f"{big}: larger than 1 MiB, not a config file"


def test_yaml_alias_bomb_is_refused(tmp_path: Path, monkeypatch):
    cfg = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]  # 10**9 values expanded
    cfg.write_text("\n".join(lines) + "\n")
    assert "more than 1,000,000 values (YAML aliases expanded)" in _error(cfg)


def test_section_that_is_not_a_mapping(tmp_path: Path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("pool = 5\n")
    with pytest.raises(ConfigError, match=r"c.toml: section \[pool\] must be a table/mapping, got int"):
        load_config(Pool, cfg, section="pool", environ={})


@pytest.mark.parametrize("raw,problem", [
    ("-5", "Input should be greater than or equal to 1, got -5"),
    ("abc", "Input should be a valid integer, unable to parse string as an integer, got 'abc'"),
    ("1e999", "got inf"),
])
def test_bad_number_in_environment_names_the_variable(raw, problem):
    with pytest.raises(ConfigError) as err:
        load_config(Root, environ={"SAINTPIPE_POOL__CAPACITY": raw})
    assert str(err.value).startswith("invalid configuration: pool.capacity: ")
    assert problem in str(err.value) and "(from environment variable SAINTPIPE_POOL__CAPACITY)" in str(err.value)


def test_section_env_names_the_full_variable_and_file_values_name_the_file(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"pool\.capacity: .*got 0 \(from environment variable SAINTPIPE_POOL__CAPACITY\)"):
        load_config(Pool, section="pool", environ={"SAINTPIPE_POOL__CAPACITY": "0"})
    cfg = tmp_path / "c.toml"
    cfg.write_text("[pool]\ncapacity = 3\nurl = 5\n")
    with pytest.raises(ConfigError, match=rf"pool\.url: Input should be a valid string, got 5 \(from {cfg}\)"):
        load_config(Root, cfg, environ={"SAINTPIPE_POOL__CAPACITY": "4"})
    with pytest.raises(ConfigError, match=r"bogus: not a known key here \(known: [a-z_, ]+\) \(from environment variables "
                                          r"SAINTPIPE_BOGUS__A, SAINTPIPE_BOGUS__B\)"):
        load_config(Root, environ={"SAINTPIPE_BOGUS__A": "1", "SAINTPIPE_BOGUS__B": "2"})


def test_nan_and_infinity_are_refused_even_without_bounds(tmp_path: Path):
    class Timing(StrictModel):
        seconds: float = 1.0

    cfg = tmp_path / "c.toml"
    for value in ("nan", "inf", "-inf"):
        cfg.write_text(f"seconds = {value}\n")
        with pytest.raises(ConfigError, match=rf"seconds: Input should be a finite number, got {value} "):
            load_config(Timing, cfg, environ={})


def _leaf_types(annotation, metadata=()):
    """``(type, constraints)`` of each leaf of a field's annotation (through Optional, list and Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *extra = typing.get_args(annotation)
        extra = [m for e in extra for m in (e.metadata if isinstance(e, pydantic.fields.FieldInfo) else [e])]
        yield from _leaf_types(base, [*metadata, *extra])
    elif origin in (typing.Union, types.UnionType, list):
        for arg in typing.get_args(annotation):
            yield from _leaf_types(arg, metadata)
    else:
        yield annotation, list(metadata)


def _numeric_fields(model, prefix="", seen=None):
    seen = set() if seen is None else seen
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        for leaf, metadata in _leaf_types(field.annotation, field.metadata):
            if isinstance(leaf, type) and issubclass(leaf, pydantic.BaseModel):
                yield from _numeric_fields(leaf, f"{prefix}{name}.", seen)
            elif leaf in (int, float):
                yield model, f"{prefix}{name}", leaf, metadata


def test_every_numeric_config_field_is_bounded():
    # Integers need both bounds (10**30 overflows numpy and torch); floats are finite by StrictModel.
    from saintpipe.pipeline.config import PipelineConfig
    from saintpipe.services.feature_shard.config import FeatureShardConfig
    from saintpipe.services.sampler_service.config import SamplerServiceConfig

    fields = [f for m in (PipelineConfig, FeatureShardConfig, SamplerServiceConfig) for f in _numeric_fields(m)]
    names = {name for _, name, _, _ in fields}
    assert {"trainer.seed", "samplers.sampler.roots", "pool.capacity", "shard", "chunk_bytes"} <= names
    unbounded = []
    for model, name, leaf, metadata in fields:
        low = any(isinstance(m, (annotated_types.Ge, annotated_types.Gt)) for m in metadata)
        high = any(isinstance(m, (annotated_types.Le, annotated_types.Lt)) for m in metadata)
        if leaf is int and not (low and high):
            unbounded.append(name)
        assert model.model_config.get("allow_inf_nan") is False, f"{model.__name__} allows NaN/inf"
    assert not unbounded, f"integer config fields without both bounds: {unbounded}"


@pytest.mark.parametrize("section,field,value", [
    ("trainer", "seed", -1), ("trainer", "max_steps", 10**30), ("trainer", "epochs", 0),
    ("samplers", "sampler", {"kind": "random_walk", "walk_length": 10**30}), ("pool", "capacity", 10**30),
    ("run", "stop_grace_s", 1e300),
])
def test_pipeline_config_refuses_out_of_range_numbers(tmp_path: Path, section, field, value):
    from saintpipe.pipeline.config import load_pipeline_config

    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({section: {field: value}}))
    with pytest.raises(ConfigError, match=rf"invalid configuration: {section}\.{field}.*\(from {cfg}\)"):
        load_pipeline_config(cfg, environ={})


# A null in a config file (issue 43, point 5): it was dropped, so `clip_multiple: null` became the default 16.
class Clipped(StrictModel):
    clip_multiple: int | None = pydantic.Field(16, ge=1)
    capacity: int = pydantic.Field(64, ge=1)
    mode: int | str = 1
    pool: Pool = Pool()


@pytest.mark.parametrize("name,text", [("c.yaml", "clip_multiple: null\n"), ("c.yml", "clip_multiple: ~\n"),
                                       ("c.json", '{"clip_multiple": null}')])
def test_null_sets_an_optional_field_to_none(tmp_path: Path, name, text):
    cfg = tmp_path / name
    cfg.write_text(text)
    assert load_config(Clipped, cfg, environ={}).clip_multiple is None
    assert load_config(Clipped, None, environ={"SAINTPIPE_CLIP_MULTIPLE": "x"}).clip_multiple == 16  # no "__"
    assert load_config(Clipped, None, environ={"SAINTPIPE_S__CLIP_MULTIPLE": "null"},
                       section="s").clip_multiple is None
    # A flag not given (None) sets nothing: the file's null stays; a flag given wins.
    assert load_config(Clipped, cfg, flags={"clip_multiple": None}, environ={}).clip_multiple is None
    assert load_config(Clipped, cfg, flags={"clip_multiple": 8}, environ={}).clip_multiple == 8


@pytest.mark.parametrize("text,key", [("capacity: null\n", "capacity"), ("pool:\n  capacity: ~\n", "pool.capacity"),
                                      ("pool: null\n", "pool"), ("mode: null\n", "mode")])
def test_null_on_a_field_that_cannot_be_none_is_refused_naming_the_key(tmp_path: Path, text, key):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(Clipped, cfg, environ={})
    message = str(err.value)
    assert message == (f"invalid configuration: {key}: null is not allowed here; remove the key for the default "
                       f"(from {cfg})")


def test_null_in_a_variable_is_refused_naming_the_variable(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"^invalid configuration: s\.capacity: null is not allowed here; remove "
                                          r"the key for the default \(from environment variable "
                                          r"SAINTPIPE_S__CAPACITY\)$"):
        load_config(Clipped, None, environ={"SAINTPIPE_S__CAPACITY": "null"}, section="s")


def test_null_in_a_sampler_section_turns_clipping_off(tmp_path: Path):
    from saintpipe.services.sampler_service.config import SECTION, SamplerServiceConfig

    cfg = tmp_path / "samplers.yaml"
    cfg.write_text(f"{SECTION}:\n  sampler:\n    kind: node\n    clip_multiple: null\n")
    config = load_config(SamplerServiceConfig, cfg, {"data": tmp_path}, environ={}, section=SECTION)
    assert config.sampler.kind == "node" and config.sampler.clip_multiple is None
    cfg.write_text(f"{SECTION}:\n  sampler:\n    kind: node\n    kappa: null\n")
    with pytest.raises(ConfigError, match=r"samplers\.sampler\.node\.kappa: null is not allowed here"):
        load_config(SamplerServiceConfig, cfg, {"data": tmp_path}, environ={}, section=SECTION)


def test_null_given_on_the_command_line_is_config_null(tmp_path: Path):
    import argparse

    from saintpipe.core.config import NULL
    from saintpipe.services.sampler_service.cli import sampler_flags
    from saintpipe.services.sampler_service.config import SECTION, SamplerServiceConfig

    cfg = tmp_path / "sampler.yaml"
    cfg.write_text("sampler:\n  kind: edge\n  clip_multiple: null\n")
    for args in (argparse.Namespace(sampler_config=cfg, sampler_kind=None, param=[]),
                 argparse.Namespace(sampler_config=None, sampler_kind="edge", param=["clip_multiple=null"])):
        flags = {"data": tmp_path, "sampler": sampler_flags(args)}
        assert flags["sampler"]["clip_multiple"] is NULL
        config = load_config(SamplerServiceConfig, None, flags, environ={}, section=SECTION)
        assert config.sampler.kind == "edge" and config.sampler.clip_multiple is None
    args = argparse.Namespace(sampler_config=None, sampler_kind=None, param=["kappa=null"])
    with pytest.raises(ConfigError, match=r"samplers\.sampler\.random_walk\.kappa: null is not allowed here; remove "
                                          r"the key for the default \(from command-line flags\)"):
        load_config(SamplerServiceConfig, None, {"data": tmp_path, "sampler": sampler_flags(args)}, environ={},
                    section=SECTION)
