"""Messages users read: counts in the singular when there is one, help examples that name real keys, and an
unknown key answered with the keys that exist (issue 22)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from saintpipe.cli import build_parser, main
from saintpipe.core.config import load_config
from saintpipe.core.errors import ConfigError
from saintpipe.core.model_fields import fields_at
from saintpipe.core.report import plural
from saintpipe.services.sampler.config import NodeConfig, RandomWalkConfig
from saintpipe.services.sampler_service.config import SECTION, SamplerServiceConfig


@pytest.mark.parametrize("count, noun, plural_form, text", [
    (1, "worker", None, "1 worker"), (0, "worker", None, "0 workers"), (2, "shard", None, "2 shards"),
    (1, "retry", "retries", "1 retry"), (3, "retry", "retries", "3 retries"), (12_345, "row", None, "12,345 rows"),
])
def test_plural(count, noun, plural_form, text):
    assert plural(count, noun, plural_form) == text


def test_no_message_says_1_workers():
    """The messages that print a count through a plain f-string, found by grep, now go through plural()."""
    root = Path(__file__).resolve().parents[3]
    sources = [p for folder in ("saintpipe", "services", "trainer") for p in (root / folder).rglob("*.py")
               if "_pb2" not in p.name]
    bare = re.compile(r"\{len\([^}]*\)\} (workers|shards|trainers)\b|%d (workers|shards) ")
    offenders = [f"{p.relative_to(root)}:{n}" for p in sources
                 for n, line in enumerate(p.read_text().splitlines(), 1) if bare.search(line)]
    assert offenders == []


def _param_help(capsys) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "samplers", "--help"])
    return capsys.readouterr().out


def test_the_param_example_in_the_help_is_a_field_of_the_default_sampler(capsys):
    text = " ".join(_param_help(capsys).split())
    examples = [key for key in re.findall(r"--param (\w+)=", text) if key != "KEY"]  # not the metavar
    assert examples, text
    default_kind = SamplerServiceConfig.model_fields["sampler"].default_factory().kind
    assert default_kind == "random_walk"
    assert set(examples) <= set(RandomWalkConfig.model_fields), examples
    # ...and it is accepted as the help writes it.
    config = load_config(SamplerServiceConfig, flags={"data": "ds", "sampler": {"kind": "random_walk", examples[0]: 3000}},
                         environ={}, section=SECTION)
    assert getattr(config.sampler, examples[0]) == 3000


def test_a_bad_param_key_is_one_line_naming_it_and_the_valid_keys(capsys, tmp_path):
    code = main(["serve", "samplers", "--param", "num_roots=3000", "--data", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and err.count("\n") == 1, err
    assert "samplers.sampler.random_walk.num_roots: not a known key here (known: " in err
    assert "roots" in err.split("known: ")[1] and "walk_length" in err and "(from command-line flags)" in err
    assert "Traceback" not in err


def test_the_known_keys_follow_the_sampler_kind():
    assert fields_at(SamplerServiceConfig, ("sampler", "node")) == sorted(NodeConfig.model_fields)
    assert fields_at(SamplerServiceConfig, ("sampler", "random_walk")) == sorted(RandomWalkConfig.model_fields)
    assert "workers" in fields_at(SamplerServiceConfig, ())
    assert fields_at(SamplerServiceConfig, ("workers",)) is None  # not a model
    assert fields_at(SamplerServiceConfig, ("nothing", "here")) is None


def test_a_typo_in_a_config_file_names_the_file_and_the_keys(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[samplers]\nworkrs = 2\n[samplers.sampler]\nkind = "node"\nnode_budgt = 10\n')
    with pytest.raises(ConfigError) as err:
        load_config(SamplerServiceConfig, path, environ={}, section=SECTION)
    text = str(err.value)
    assert "samplers.workrs: not a known key here (known: " in text and f"(from {path})" in text
    assert "samplers.sampler.node.node_budgt: not a known key here (known: clip_multiple" in text
    assert "node_budget" in text
