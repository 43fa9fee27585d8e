"""``-v`` is accepted before, between and after the commands, by every command (issue 22).

The test walks the real parser tree, so a command registered later (by any
module) is covered too. Only ``parse_args`` runs, except for one call of
``main`` that stops at the logging set-up.
"""

from __future__ import annotations

import argparse

import pytest

import saintpipe.cli as cli
from saintpipe.cli import build_parser, main, verbosity
from saintpipe.core.errors import ConfigError


def _children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is None:
        return {}
    unique: dict[int, tuple[str, argparse.ArgumentParser]] = {}
    for name, child in sub.choices.items():
        unique.setdefault(id(child), (name, child))  # aliases share a parser
    return dict(unique.values())


def _required(parser: argparse.ArgumentParser) -> list[str]:
    """Values for the positionals and required options of one parser (not of its subcommands)."""
    argv: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        value = str(next(iter(action.choices))) if action.choices else "1"
        if not action.option_strings and action.nargs not in ("?", "*", argparse.SUPPRESS):
            argv.append(value)
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], value]
    return argv


def _leaves(parser, path=()):
    """(path of (name, required args) per level, leaf parser) for every command."""
    children = _children(parser)
    if not children:
        yield path, parser
    for name, child in children.items():
        yield from _leaves(child, (*path, (name, _required(child))))


COMMANDS = list(_leaves(build_parser()))


def test_the_tree_has_the_commands_of_the_issue():
    names = {" ".join(name for name, _ in path) for path, _ in COMMANDS}
    assert {"run", "serve samplers", "data generate demo", "doctor"} <= names
    assert any(name.startswith("data import ") for name in names)


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(n for n, _ in p))
def test_every_command_takes_v_before_after_and_between(path):
    parser = build_parser()
    words = [w for name, req in path for w in (name, *req)]
    assert verbosity(parser.parse_args(words)) == 0
    assert verbosity(parser.parse_args(["-v", *words])) == 1
    assert verbosity(parser.parse_args([*words, "-v"])) == 1
    assert verbosity(parser.parse_args([*words, "-vv"])) == 2
    assert verbosity(parser.parse_args(["-v", *words, "--verbose"])) == 2
    first, *rest = path  # after the group, before the command: saintpipe data -v import ...
    if rest:
        between = [first[0], *first[1], "-v", *[w for name, req in rest for w in (name, *req)], "-v"]
        assert verbosity(parser.parse_args(between)) == 2


@pytest.mark.parametrize("words", [[], ["run"], ["serve", "samplers"], ["data", "import"]])
def test_the_help_of_each_level_lists_v(capsys, words):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*words, "--help"])
    assert "-v, --verbose" in capsys.readouterr().out


@pytest.mark.parametrize("argv, expected", [
    (["-v", "doctor"], 1), (["doctor", "-v"], 1), (["doctor", "-vv"], 2), (["doctor"], 0),
])
def test_main_configures_logging_with_the_flags_wherever_they_are(monkeypatch, capsys, argv, expected):
    seen = []

    def record(count: int) -> None:
        seen.append(count)
        raise ConfigError("stop here")  # the command itself does not run

    monkeypatch.setattr(cli, "configure_logging", record)
    assert main(argv) == ConfigError.exit_code
    assert seen == [expected]
    assert "stop here" in capsys.readouterr().err
