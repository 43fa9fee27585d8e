"""Flags generated from the config models (issue 43, point 5): one source of ranges, defaults and help."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

import pydantic
import pytest

from saintpipe.cli import build_parser
from saintpipe.core.argtypes import Bounds, Integer, Real
from saintpipe.core.seeds import SEED_MAX
from saintpipe.core.config import StrictModel, load_config
from saintpipe.core.model_flags import ModelFlags, add_model_flags
from saintpipe.services.feature_shard.config import SECTION, FeatureShardConfig


class Toy(StrictModel):
    model_config = pydantic.ConfigDict(use_attribute_docstrings=True)  # as TrainerConfig's

    count: int = pydantic.Field(8, ge=1, le=1024)
    """how many"""
    ratio: float = pydantic.Field(0.5, gt=0, lt=1, description="a share, 100% excluded")
    seed: int = pydantic.Field(0, ge=0, lt=2**63, description="a seed")
    mode: Literal["a", "b"] = pydantic.Field("a", description="the mode")
    path: Path | None = pydantic.Field(None, description="a file")
    name: str | None = pydantic.Field(None, description="a name")
    fast: bool = pydantic.Field(True, description="go fast")
    slow: bool = pydantic.Field(False, description="go slow")
    limit: int | None = pydantic.Field(None, ge=0, le=10, description="an optional limit")


def _toy(argv: list[str]) -> tuple[ModelFlags, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="toy")
    flags = add_model_flags(parser, Toy, {"count": "--count", "ratio": "--ratio", "seed": "--seed", "mode": "--mode",
                                          "path": "--path", "name": "--name", "fast": "--no-fast", "slow": "--slow",
                                          "limit": "--limit"}, under="toy")
    return flags, parser.parse_args(argv)


def test_types_ranges_and_values_come_from_the_model():
    flags, args = _toy([])
    assert flags.values(args) == {}  # nothing given: nothing set, so the file and the environment stay
    flags, args = _toy(["--count", "3", "--ratio", "0.25", "--seed", str(SEED_MAX), "--mode", "b", "--path", "f",
                        "--name", "n", "--no-fast", "--slow", "--limit", "0"])
    assert flags.values(args) == {"toy": {"count": 3, "ratio": 0.25, "seed": SEED_MAX, "mode": "b", "path": Path("f"),
                                          "name": "n", "fast": False, "slow": True, "limit": 0}}
    parser = argparse.ArgumentParser()
    add_model_flags(parser, Toy, ("count", "ratio", "seed", "mode"))
    actions = {a.dest: a for a in parser._actions}
    assert isinstance(actions["count"].type, Integer) and actions["count"].type.bounds == Bounds(1, 1024)
    assert isinstance(actions["ratio"].type, Real)
    assert actions["ratio"].type.bounds == Bounds(0.0, 1.0, min_open=True, max_open=True)
    assert actions["seed"].type.bounds == Bounds(0, 2**63 - 1)  # lt on an integer is le one below
    assert actions["mode"].choices == ["a", "b"] and actions["count"].default is None


@pytest.mark.parametrize("argv,message", [
    (["--count", "0"], "toy: error: argument --count: must be an integer from 1 to 1024, got 0"),
    (["--ratio", "1"], "toy: error: argument --ratio: must be a number greater than 0 and less than 1, got 1"),
    (["--seed", str(2**63)], f"argument --seed: must be an integer from 0 to {SEED_MAX}, got {2**63}"),
    (["--mode", "c"], "toy: error: argument --mode: invalid choice: 'c'"),
])
def test_a_value_out_of_the_fields_range_is_argparses_one_line_error(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        _toy(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err


def field_help(field: str) -> str:
    parser = argparse.ArgumentParser()
    add_model_flags(parser, Toy, (field,))
    return parser._actions[-1].help


def test_help_is_the_description_with_the_models_range_and_default():
    assert field_help("count") == "how many (from 1 to 1024; default 8)"  # the docstring is the description
    assert field_help("ratio") == "a share, 100%% excluded (greater than 0 and less than 1; default 0.5)"
    assert field_help("limit") == "an optional limit (from 0 to 10)"
    assert field_help("mode") == "the mode (default a)"
    parser = argparse.ArgumentParser()
    add_model_flags(parser, Toy, {"fast": "--no-fast"})
    assert parser._actions[-1].help == "fast = false (default true): go fast"


def test_the_real_commands_show_their_models_defaults(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "feature-shard", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "gRPC handler threads (concurrent calls) (from 1 to 1024; default 8)" in text
    default = FeatureShardConfig.model_fields["max_message_bytes"].default
    assert f"(from 4096 to 2147483647; default {default})" in text


@pytest.mark.parametrize("field,flag", [("hidden", "--hidden"), ("lr", "--lr"), ("bias", "--bias")])
def test_a_field_without_a_flag_form_is_refused_when_the_parser_is_built(field, flag):
    from saintpipe.trainer.config import ModelConfig

    with pytest.raises(TypeError, match=rf"ModelConfig\.{field} \({flag}\)"):
        # hidden: a list; lr: no upper bound; bias: a switch must turn its default off (--no-bias)
        add_model_flags(argparse.ArgumentParser(), ModelConfig, {field: flag})


def test_a_field_without_a_description_has_no_flag():
    class Bare(StrictModel):
        count: int = pydantic.Field(1, ge=1, le=2)

    with pytest.raises(TypeError, match="no description"):
        add_model_flags(argparse.ArgumentParser(), Bare, ["count"])


def test_flag_over_environment_over_file(tmp_path):
    cfg = tmp_path / "shard.yaml"
    cfg.write_text(f"{SECTION}:\n  data: {tmp_path}\n  shard: 0\n  max_workers: 2\n")
    env = {"SAINTPIPE_FEATURE_SHARD__MAX_WORKERS": "3"}

    def loaded(flags: list[str], environ: dict[str, str]) -> FeatureShardConfig:
        args = build_parser().parse_args(["serve", "feature-shard", "--config", str(cfg), *flags])
        return load_config(FeatureShardConfig, args.config, args._model_flags.values(args), environ, section=SECTION)

    assert loaded([], {}).max_workers == 2
    assert loaded([], env).max_workers == 3
    assert loaded(["--max-workers", "4"], env).max_workers == 4
    both = loaded(["--no-bulk", "--grace", "0.5"], env)
    assert both.bulk is False and both.grace_seconds == 0.5 and both.shared_memory is True
    assert loaded([], {}).max_message_bytes == FeatureShardConfig.model_fields["max_message_bytes"].default


def test_serve_trainer_and_samplers_send_their_flags_to_the_right_sections():
    args = build_parser().parse_args(["serve", "trainer", "--job", "j", "--redis-url", "redis://h:1/0",
                                      "--epochs", "3", "--feature-tls-ca", "ca.pem"])
    assert args._pool_flags.values(args) == {"url": "redis://h:1/0", "job_id": "j"}
    assert args._trainer_flags.values(args) == {"epochs": 3, "feature_tls_ca": Path("ca.pem")}
    assert args.job == "j"  # the dest is the flag's name
    args = build_parser().parse_args(["serve", "samplers", "--job", "j", "--pool-capacity", "8", "--seed", "5",
                                      "--graph", "train"])
    service, pool = args._model_flags
    assert service.values(args) == {"seed": 5, "graph": "train"}
    assert pool.values(args) == {"pool": {"job_id": "j", "capacity": 8}}
