"""``saintpipe bench``'s benchmarks: each named for what it measures, all in saintpipe.bench, old names kept.

Only the parser is built: no benchmark runs.
"""

from __future__ import annotations

import argparse

from saintpipe.cli import build_parser
from saintpipe.cli.bench import BENCHMARKS

# name -> its aliases (the names it had before issue 43).
NAMES = {
    "kernels": ["sampler"],
    "sampler-service": ["samplers"],
    "pool": [],
    "features": [],
    "train": [],
    "inference": [],
    "accuracy": [],
    "loader": [],
    "startup": [],
    "sweep": [],
    "generate": [],
    "import": [],
}


def _bench_subparsers() -> argparse._SubParsersAction:
    groups = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    bench = groups.choices["bench"]
    return next(a for a in bench._actions if isinstance(a, argparse._SubParsersAction))


def test_every_benchmark_lives_in_saintpipe_bench():
    assert all(name.startswith("saintpipe.bench.") for name in BENCHMARKS)
    assert len(BENCHMARKS) == len(NAMES)


def test_the_benchmarks_names_and_aliases():
    sub = _bench_subparsers()
    listed = [action.dest for action in sub._choices_actions]  # what --help lists, one line each
    assert listed == list(NAMES)
    assert set(sub.choices) == set(NAMES) | {alias for aliases in NAMES.values() for alias in aliases}
    for name, aliases in NAMES.items():
        for alias in aliases:
            assert sub.choices[alias] is sub.choices[name], alias
    # Each has a one-line help saying what it measures.
    for action in sub._choices_actions:
        assert action.help and "\n" not in action.help, action.dest


def test_an_old_name_runs_the_same_benchmark():
    parser = build_parser()
    old = parser.parse_args(["bench", "sampler", "--quick"])
    new = parser.parse_args(["bench", "kernels", "--quick"])
    assert old.func is new.func
    old = parser.parse_args(["bench", "samplers", "--seconds", "0.5"])
    new = parser.parse_args(["bench", "sampler-service", "--seconds", "0.5"])
    assert old.func is new.func


def test_bench_help_lists_every_benchmark(capsys):
    try:
        build_parser().parse_args(["bench", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    for name, aliases in NAMES.items():
        shown = f"{name} ({', '.join(aliases)})" if aliases else name
        assert f"    {shown}" in out, shown


def test_bench_loader_takes_its_flags():
    args = build_parser().parse_args(["bench", "loader", "--data", "d", "--steps", "5", "--roots", "7",
                                      "--workers", "1", "2"])
    assert (str(args.data), args.steps, args.roots, args.workers) == ("d", 5, 7, [1, 2])
