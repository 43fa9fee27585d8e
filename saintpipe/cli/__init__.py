"""The ``saintpipe`` command line: one entry point with subcommand groups.

Groups: ``data`` (import, generate, inspect datasets), ``run`` (the all-in-one local pipeline), ``sweep``
(hyperparameter trials sharing one run's services), ``serve`` (each service on its own), ``bench`` (benchmarks
that print their figures), ``doctor`` (saintpipe's files in /dev/shm, and removing those of dead processes)
and ``certs`` (TLS material for the feature shards). Each group lives in its own module and registers its
commands on the parser; a command's handler takes the parsed arguments and returns an exit code.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from saintpipe import __version__
from saintpipe.core.errors import ConfigError, SaintpipeError

VERBOSE_HELP = ("more log output (-vv for debug), before or after the command; without it, SAINTPIPE_LOG_LEVEL "
                "(a level name, e.g. INFO in containers) or WARNING")
_VERBOSE_DEST = "verbose:"


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, like every other saintpipe error.

    The usage block argparse prints first runs to a dozen lines for the larger commands and buries the line
    that says what is wrong; ``--help`` still has it. Subcommand parsers inherit the class (``add_subparsers``
    uses the parent's), so every parser of the tree, including the commands other modules register, also takes
    the global ``-v``: ``saintpipe -v run``, ``saintpipe run -v`` and ``saintpipe data -v import ...`` are the
    same. Each parser counts its own ``-v`` under its own name (argparse copies a subcommand's values over its
    parent's, so one shared name would lose the outer count); :func:`verbosity` adds them up.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.add_help:  # a parent parser (add_help=False) would hand its -v to a parser that has one
            self.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                              dest=_VERBOSE_DEST + self.prog, help=VERBOSE_HELP)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from saintpipe.cli import bench, certs, data, doctor, predict, run, serve, sweep

    parser = Parser(
        prog="saintpipe",
        description=(
            "GraphSAINT-style GNN training as a pipeline: sampler workers cut induced subgraphs, "
            "a Redis pool buffers them, sharded gRPC servers serve node features, trainers train."
        ),
    )
    parser.add_argument("--version", action="version", version=f"saintpipe {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)
    data.register(groups)
    run.register(groups)
    sweep.register(groups)
    predict.register(groups)  # predict and embed: use a run's model
    serve.register(groups)
    bench.register(groups)
    doctor.register(groups)
    certs.register(groups)
    return parser


LOG_LEVEL_ENV = "SAINTPIPE_LOG_LEVEL"


def verbosity(args: argparse.Namespace) -> int:
    """How many ``-v`` were given, wherever on the command line (before, between or after the commands)."""
    return sum(count for name, count in vars(args).items() if name.startswith(_VERBOSE_DEST))


def log_level(verbosity: int, environ: Mapping[str, str] = os.environ) -> int:
    """The root level: -v/-vv when given, else SAINTPIPE_LOG_LEVEL, else WARNING.

    Raises:
        ConfigError: SAINTPIPE_LOG_LEVEL is not a level name.
    """
    if verbosity > 0:
        return logging.INFO if verbosity == 1 else logging.DEBUG
    name = environ.get(LOG_LEVEL_ENV, "").strip().upper()
    if not name:
        return logging.WARNING
    level = logging.getLevelNamesMapping().get(name)
    if level is None:
        raise ConfigError(f"{LOG_LEVEL_ENV}={environ[LOG_LEVEL_ENV]!r}: not a log level "
                          "(DEBUG, INFO, WARNING, ERROR or CRITICAL)")
    return level


def configure_logging(verbosity: int) -> None:
    level = log_level(verbosity)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.verbose = verbosity(args)
    try:
        configure_logging(args.verbose)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so that a reader that went away is met below and not at the exit
        return code
    except BrokenPipeError:
        # The reader of our output went away (`saintpipe data info DIR | head`): stop quietly, as cat does.
        # Python would flush stdout again at the exit and report that failure too: it goes to /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command a closed pipe stopped
    except SaintpipeError as exc:
        print(f"saintpipe: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except MemoryError as exc:
        # The last line of defence: sizes are checked before large allocations, but an estimate can be short.
        print(f"saintpipe: error: out of memory: {exc or 'an allocation failed'}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("saintpipe: interrupted", file=sys.stderr)
        return 130
