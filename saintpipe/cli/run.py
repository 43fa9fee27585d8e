"""``saintpipe run``: the main job, on the built-in demo dataset by default."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from saintpipe.core.model_flags import add_model_flags
from saintpipe.pipeline.config import RunConfig


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser(
        "run",
        help="run the whole pipeline locally (demo dataset by default)",
        description="Run the whole pipeline on this machine with no set-up: a private Redis, one feature-shard "
        "process per shard, a local Ray cluster with the sampler workers and the trainer, and a Prometheus "
        "endpoint per component. Without --data, the built-in demo dataset is generated on first use. "
        "Ctrl-C (or SIGTERM) stops every component. Settings: defaults < --config file (sections [run], "
        "[pool], [samplers], [trainer]) < SAINTPIPE_<SECTION>__<FIELD> < flags; see docs/how-to/local-run.md.",
    )
    # --data and --run-dir set [run] fields: made from RunConfig (help from its descriptions).
    add_model_flags(parser, RunConfig, ("data",))
    parser.add_argument("--config", type=Path, help="config file (TOML, YAML or JSON)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object as well")
    add_model_flags(parser, RunConfig, ("run_dir",))
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR",
                        help="go on with an interrupted run from its latest checkpoint, with its stored config "
                             "(--config, SAINTPIPE_* variables and flags given now override it); RUN_DIR is the "
                             "'run directory' line of its summary, or a checkpoint directory")
    parser.set_defaults(func=_run)

    warmup = groups.add_parser(
        "warmup",
        help="compile the Numba kernels a run uses, once (./scripts/run.sh does it at set-up)",
        description="Compile every Numba kernel the default run uses, by a one-epoch run of the whole pipeline "
        "on a small demo graph in a temporary directory, so that the first real run loads them from Numba's "
        "cache instead of compiling them while the trainer waits. With --if-cold, only when the cache does not "
        "hold them yet.",
    )
    warmup.add_argument("--if-cold", action="store_true", help="do nothing when the kernels are cached already")
    warmup.set_defaults(func=_warmup)


def _warmup(args: argparse.Namespace) -> int:
    from saintpipe.pipeline.kernel_cache import kernels_cached
    from saintpipe.pipeline.warmup import warm_up

    if args.if_cold and kernels_cached():
        return 0
    print("compiling the kernels once (a small run of the whole pipeline; later runs load them from the cache)",
          flush=True)
    print(f"kernels compiled and cached in {warm_up():.0f} s", flush=True)
    return 0


def _run(args: argparse.Namespace) -> int:
    from saintpipe.core.errors import ConfigError
    from saintpipe.services.dataset.info import describe
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.pipeline.config import load_pipeline_config
    from saintpipe.pipeline.run_dir import resume_target
    from saintpipe.pipeline.runner import LocalPipeline, RunFailed

    if args.resume is not None:
        target = resume_target(args.resume)
        if args.run_dir is not None and target.run_dir is not None and args.run_dir.resolve() != target.run_dir:
            raise ConfigError(f"--run-dir {args.run_dir} and --resume {args.resume}: a resumed run goes on in its "
                              f"own run directory ({target.run_dir})")
        config = load_pipeline_config(args.config, data=args.data, stored=target.config,
                                      run_dir=target.run_dir or args.run_dir)
        config.trainer.checkpoint_dir = target.checkpoint_dir
        config.run.checkpoints = True
    else:
        config = load_pipeline_config(args.config, data=args.data, run_dir=args.run_dir)
    if config.run.data is None:
        from saintpipe.services.dataset.demo import ensure_demo_dataset

        config.run.data = ensure_demo_dataset()
    print(describe(open_dataset(config.run.data)), flush=True)
    pipeline = LocalPipeline(config, resume=args.resume is not None)
    try:
        summary = pipeline.run()
    except RunFailed as failed:
        # What ran, then the one line that says why it ended and how to go on.
        _print_summary(failed.summary, args.json)
        resume = f"; resume with: saintpipe run --resume {failed.summary.run_dir}" \
            if failed.summary.checkpoint_dir else ""
        print(f"saintpipe: error: {failed}{resume}", file=sys.stderr, flush=True)
        return failed.exit_code
    _print_summary(summary, args.json)
    return pipeline.supervisor.exit_code


def _print_summary(summary, as_json: bool) -> None:
    from saintpipe.pipeline.summary import format_summary

    print(format_summary(summary), flush=True)
    if as_json:
        print(summary.to_json(), flush=True)
