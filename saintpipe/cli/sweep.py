"""``saintpipe sweep``: hyperparameter trials sharing one sampler fleet, one pool and one feature service."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from saintpipe.core.model_flags import add_model_flags
from saintpipe.pipeline.config import RunConfig
from saintpipe.services.pool.config import PoolConfig
from saintpipe.sweep.config import SweepSection
from saintpipe.trainer.config import TrainerConfig


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser(
        "sweep",
        help="a hyperparameter sweep: trials that share one set of samplers, pool and feature shards",
        description="Run the trials of a sweep file (a run config file with [sweep] and [sweep.space]) as Ray "
        "Tune trials on one set of services: every trial that runs at the same time trains on the very same "
        "stream of subgraphs. Without --data, the built-in demo dataset. Writes results.csv and results.json "
        "(best validation first) and a run directory per trial under the sweep directory. Ctrl-C stops the "
        "sweep; --resume SWEEP_DIR goes on without running the finished trials again. With --features, the "
        "sweep runs against a pipeline that runs already (a compose stack, a Helm release): its Redis "
        "(--redis-url or SAINTPIPE_REDIS_URL), feature shards, samplers (--job) and dataset (--data), as "
        "`saintpipe serve trainer` is told them (docs/how-to/sweeps.md).",
    )
    parser.add_argument("--config", type=Path, metavar="SWEEP_FILE", help="the sweep file (TOML, YAML or JSON)")
    add_model_flags(parser, RunConfig, ("data",))
    parser.add_argument("--sweep-dir", type=Path, help="where the results and the trials' run directories go "
                        "(default: $SAINTPIPE_HOME/sweeps/<time>-<job>)")
    parser.add_argument("--resume", type=Path, metavar="SWEEP_DIR", help="go on with an interrupted sweep: its "
                        "stored configuration (--config, SAINTPIPE_* variables and --data override it); trials "
                        "done are not run again")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object as well")
    running = parser.add_argument_group("a pipeline that runs already (what `saintpipe serve trainer` is told)")
    flags = [add_model_flags(running, SweepSection, {"features": "--features"}, under="sweep"),
             add_model_flags(running, PoolConfig, {"url": "--redis-url", "job_id": "--job"}, under="pool"),
             add_model_flags(running, TrainerConfig, ("feature_tls_ca", "feature_tls_cert", "feature_tls_key",
                                                      "feature_tls_server_name", "feature_token_file"),
                             under="trainer")]
    parser.set_defaults(func=_sweep, _model_flags=flags)


def _sweep(args: argparse.Namespace) -> int:
    from saintpipe.core.config import deep_merge
    from saintpipe.core.errors import ConfigError
    from saintpipe.core.paths import home, new_run_dir
    from saintpipe.sweep.driver import load_sweep, run_sweep

    if args.resume is not None and args.sweep_dir is not None and args.sweep_dir.resolve() != args.resume.resolve():
        raise ConfigError(f"--sweep-dir {args.sweep_dir} and --resume {args.resume}: a resumed sweep goes on in its "
                          "own directory")
    flags: dict = {}
    for model_flags in args._model_flags:
        flags = deep_merge(flags, model_flags.values(args))
    config = load_sweep(args.config, args.data, args.resume, flags=flags)  # everything checked before anything starts
    if config.run.data is None:
        from saintpipe.services.dataset.demo import ensure_demo_dataset

        config.run.data = ensure_demo_dataset()
    if args.resume is not None:
        sweep_dir = args.resume
    elif args.sweep_dir is not None:
        sweep_dir = args.sweep_dir
    else:
        sweep_dir = new_run_dir(config.pool.job_id, parent=home() / "sweeps")
    summary = run_sweep(config, sweep_dir, resume=args.resume is not None)
    print(f"\nsweep directory  {summary.sweep_dir}", flush=True)
    print(summary.results.table(), flush=True)
    best = summary.best()
    if best is not None:
        print(f"best trial       {best.trial} (validation {best.best_val:.4f}): {best.run_dir}", flush=True)
    if args.json:
        print(summary.to_json(), flush=True)
    if summary.interrupted:
        print(f"saintpipe: sweep interrupted; go on with: saintpipe sweep --resume {summary.sweep_dir}",
              file=sys.stderr, flush=True)
        return 130
    return 0
