"""Every numeric flag of every command is range-checked while argparse parses (issue 19, finding 4).

The test walks the real parsers (``saintpipe`` and the container health
probe) down every subcommand, so a flag added later with ``type=int`` fails
here. Handlers never run: only ``parse_args``.
"""

from __future__ import annotations

import argparse

import pytest

from saintpipe.cli import build_parser
from saintpipe.cli import health_probe
from saintpipe.core.argtypes import Bounds, Integer, Real, integer, port, real, seed

HOSTILE = ("-5", "0", str(10**30), "nan", "abc")


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _valid(action: argparse.Action) -> str:
    """A value the action accepts, to fill what a command requires besides the flag under test."""
    if action.choices:
        return str(next(iter(action.choices)))
    if isinstance(action.type, (Integer, Real)):
        b = action.type.bounds
        value = b.min if not b.min_open else (b.min + min(b.max, b.min + 1)) / 2
        return str(int(value) if isinstance(action.type, Integer) else value)
    return "x"


def _required(parser: argparse.ArgumentParser, skip: argparse.Action | None = None) -> list[str]:
    """Arguments that make ``parser`` parse: its required positionals and options, then a whole subcommand."""
    argv: list[str] = []
    for action in parser._actions:
        if action is skip or isinstance(action, argparse._SubParsersAction):
            continue
        if not action.option_strings and action.nargs not in ("?", "*", argparse.SUPPRESS):
            argv.append(_valid(action))
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], _valid(action)]
    sub = _subparsers(parser)
    if sub is not None:
        name, child = next(iter(sub.choices.items()))
        argv += [name, *_required(child)]
    return argv


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, parser)`` for ``parser`` and every subcommand below it, each parser once."""
    yield path, parser
    sub = _subparsers(parser)
    if sub is not None:
        seen: set[int] = set()
        for name, child in sub.choices.items():
            if id(child) not in seen:
                seen.add(id(child))
                yield from _walk(child, (*path, name))


def _options(root: argparse.ArgumentParser):
    for path, parser in _walk(root):
        for action in parser._actions:
            if action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                yield path, parser, action


ROOTS = {"saintpipe": build_parser, "health_probe": health_probe.build_parser}


def _numeric_flags() -> list[tuple[str, tuple[str, ...], str]]:
    flags = []
    for root_name, build in ROOTS.items():
        for path, _, action in _options(build()):
            if isinstance(action.type, (Integer, Real)):
                flags.append((root_name, path, action.option_strings[-1]))
    return flags


NUMERIC_FLAGS = _numeric_flags()


def test_walk_reaches_the_commands_of_the_issue():
    # The walk must really descend: the issue's own examples are among the flags it checks.
    found = {(path, flag) for _, path, flag in NUMERIC_FLAGS}
    for expected in [(("data", "generate", "demo"), "--nodes"), (("data", "generate", "demo"), "--seed"),
                     (("data", "generate", "kronecker"), "--seed"), (("serve", "feature-shard"), "--port"),
                     (("serve", "trainer"), "--epochs"), (("bench", "features"), "--repeats"), ((), "--timeout")]:
        assert expected in found, expected
    assert len(NUMERIC_FLAGS) > 60


@pytest.mark.parametrize("root_name", sorted(ROOTS))
def test_no_numeric_flag_uses_a_bare_int_or_float(root_name):
    offenders = []
    for path, _, action in _options(ROOTS[root_name]()):
        where = " ".join((*path, action.option_strings[-1]))
        if action.type in (int, float):
            offenders.append(f"{where}: type={action.type.__name__}")
        elif (action.type is None and isinstance(action, argparse._StoreAction)
              and isinstance(action.default, (int, float)) and not isinstance(action.default, bool)):
            offenders.append(f"{where}: numeric default {action.default!r} but no type (a string would pass)")
    assert not offenders, "use saintpipe.core.argtypes types: " + "; ".join(offenders)


def _find(root: argparse.ArgumentParser, path: tuple[str, ...], flag: str):
    for p, parser, action in _options(root):
        if p == path and flag in action.option_strings:
            return parser, action
    raise AssertionError(f"{path} {flag} not found")


def _in_range(action: argparse.Action, text: str) -> int | float | None:
    """The number ``text`` means when it is one the flag must accept, else None."""
    try:
        value = int(text) if isinstance(action.type, Integer) else float(text)
    except ValueError:
        return None
    if value != value:  # NaN is never accepted
        return None
    return value if action.type.bounds.contains(value) else None


@pytest.mark.parametrize("root_name,path,flag", NUMERIC_FLAGS, ids=[" ".join((r, *p, f)) for r, p, f in NUMERIC_FLAGS])
def test_hostile_values_parse_in_range_or_exit_2_naming_the_flag(root_name, path, flag, capsys):
    root = ROOTS[root_name]()
    parser, action = _find(root, path, flag)
    for text in HOSTILE:
        head = [*path, flag, text]
        argv = head + _required(parser, skip=action)
        expected = _in_range(action, text)
        try:
            namespace = root.parse_args(argv)
        except SystemExit as exit_:
            err = capsys.readouterr().err
            assert expected is None, f"{argv}: {text} is within {action.type.bounds} but was refused: {err}"
            assert exit_.code == 2, (argv, err)
            assert "Traceback" not in err
            assert f"argument {'/'.join(action.option_strings)}: must be" in err, err
            assert action.type.bounds.describe() in err, err
            if root_name == "saintpipe":
                assert err.count("\n") == 1, f"not one line: {err!r}"
        else:
            value = getattr(namespace, action.dest)
            if action.nargs in ("*", "+"):  # a list of them (bench loader --workers): here the one given
                (value,) = value
            assert expected is not None, f"{argv}: parsed to {value!r}, outside {action.type.bounds}"
            assert value == expected and action.type.bounds.contains(value)


@pytest.mark.parametrize("argv,message", [
    (["data", "generate", "demo", "--out", "d", "--nodes", "-5"],
     "saintpipe data generate demo: error: argument --nodes: must be an integer from 1 to 2147483647, got -5"),
    (["data", "generate", "demo", "--out", "d", "--nodes", "100000000000"],
     "argument --nodes: must be an integer from 1 to 2147483647, got 100000000000"),
    (["data", "generate", "kronecker", "--out", "d", "--scale", "4", "--degree", "2", "--seed", "-1"],
     "argument --seed: must be an integer from 0 to 9223372036854775807, got -1"),
    (["data", "generate", "kronecker", "--out", "d", "--scale", "4", "--degree", "inf"],
     "argument --degree: must be a number greater than 0 and at most 1073741824, got 'inf'"),
    (["serve", "feature-shard", "--port", "65536"], "argument --port: must be an integer from 0 to 65535, got 65536"),
])
def test_messages_name_the_flag_and_the_range(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "--help" in err


def test_types_parse_and_describe_their_range():
    assert integer(1, 10)(" 7 ") == 7 and real(0, 1, min_open=True)("0.5") == 0.5
    assert seed().bounds == Bounds(0, 2**63 - 1) and port(allow_zero=False).bounds == Bounds(1, 65535)
    assert Bounds(0.0, 1.0, min_open=True, max_open=True).describe() == "greater than 0 and less than 1"
    for bad, t in [("nan", real(0, 10)), ("-inf", real(-10, 10)), ("1e999", real(0, 10)), ("1.5", integer(0, 9)),
                   ("9" * 5000, integer(0, 9)), ("0", real(0, 1, min_open=True))]:
        with pytest.raises(argparse.ArgumentTypeError, match="must be"):
            t(bad)
    with pytest.raises(ValueError, match="empty range"):
        integer(5, 1)


def test_every_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["data", "generate"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err == ("saintpipe data generate: error: the following arguments are required: GENERATOR "
                   "(see saintpipe data generate --help)\n")


def test_an_allocation_that_fails_anyway_is_one_line(monkeypatch, tmp_path, capsys):
    from saintpipe.cli import data, main

    def allocate(args):
        raise MemoryError("Unable to allocate 745. GiB for an array with shape (100000000000,) and data type int64")

    monkeypatch.setattr(data, "_generate_demo", allocate)
    assert main(["data", "generate", "demo", "--out", str(tmp_path / "d")]) == 1
    assert capsys.readouterr().err == ("saintpipe: error: out of memory: Unable to allocate 745. GiB for an array "
                                       "with shape (100000000000,) and data type int64\n")
