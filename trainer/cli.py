"""``saintpipe serve trainer``: train a job from the Redis pool and the feature shards (Ray actors, or one rank)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from saintpipe.core.argtypes import integer, port
from saintpipe.core.model_flags import ModelFlags, add_model_flags

if TYPE_CHECKING:
    from saintpipe.services.pool.config import PoolConfig
    from saintpipe.trainer.config import TrainerConfig


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "trainer",
        help="train a job: subgraphs from the Redis pool, features from the feature shards",
        description="Run N data-parallel trainer actors (Ray; a GPU each when Ray has them) on job JOB: each "
        "takes subgraphs from the pool at --redis-url, fetches their features from the shards at --features "
        "(prefetching the next while the current step computes), trains, acknowledges, validates every "
        "epoch, "
        "stops early, checkpoints and resumes. Prints the summary at the end. Settings: defaults < --config "
        "file ([trainer] and [pool] sections) < SAINTPIPE_TRAINER__<FIELD> / SAINTPIPE_POOL__<FIELD> "
        "< flags.",
    )
    # Flags that set [pool] and [trainer] fields: made from the config models (range, default and help).
    pool = pool_flags(parser)
    parser.add_argument(
        "--features",
        help='feature shard addresses "h:p;h:p" (";" between shards, "," between '
        "replicas) or a JSON address manifest",
    )
    parser.add_argument("--data", type=Path, help="dataset directory (topology, labels, splits)")
    parser.add_argument("--trainers", type=integer(1, 1024), default=1,
                        help="data-parallel trainers, 1 to 1024 (default 1)")
    parser.add_argument(
        "--metrics-port", type=port(), help="trainer r serves /metrics on PORT+r (0: free ports)"
    )
    parser.add_argument(
        "--metrics-host", default="127.0.0.1",
        help="address the metrics endpoints bind (default 127.0.0.1; 0.0.0.0 in a container)",
    )
    parser.add_argument("--config", type=Path, help="config file (TOML, YAML or JSON)")
    trainer = trainer_flags(parser)
    parser.add_argument("--ray-address", help="join this Ray cluster instead of starting a local one")
    parser.add_argument(
        "--world-size",
        type=integer(1, 4096),
        help="run ONE rank of a data-parallel group of this size in this process, without Ray (one "
        "process per rank, e.g. a Kubernetes indexed Job); needs --rank and, above 1, --master",
    )
    parser.add_argument("--rank", type=integer(0, 4095), help="this process's rank in the group (0..world size - 1)")
    parser.add_argument(
        "--master", help="HOST:PORT where rank 0 listens for the group's rendezvous (every rank names it)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.set_defaults(func=_serve, _trainer_flags=trainer, _pool_flags=pool)


def pool_flags(parser: argparse.ArgumentParser) -> ModelFlags:
    """``--redis-url`` and ``--job``: the [pool] fields a trainer takes on the command line."""
    from saintpipe.services.pool.config import PoolConfig

    return add_model_flags(parser, PoolConfig, {"url": "--redis-url", "job_id": "--job"})


def trainer_flags(parser: argparse.ArgumentParser) -> ModelFlags:
    """The [trainer] fields a trainer takes on the command line; the feature_* ones are the feature shards'
    security (docs/explanation/features.md#security): the token itself comes from a file or
    SAINTPIPE_FEATURE_TOKEN."""
    from saintpipe.trainer.config import TrainerConfig

    return add_model_flags(parser, TrainerConfig, ("epochs", "max_steps", "checkpoint_dir", "feature_tls_ca",
                                                   "feature_tls_cert", "feature_tls_key", "feature_tls_server_name",
                                                   "feature_token_file"))


def _serve(args: argparse.Namespace) -> int:
    import os

    from saintpipe.core.config import load_config
    from saintpipe.core.credentials import redis_url_with_password
    from saintpipe.core.errors import ConfigError
    from saintpipe.services.pool.config import PoolConfig
    from saintpipe.trainer.config import TrainerConfig

    config = load_config(TrainerConfig, args.config, flags=args._trainer_flags.values(args), section="trainer")
    pool = load_config(PoolConfig, args.config, flags=args._pool_flags.values(args), section="pool")
    url = pool.url or os.environ.get("SAINTPIPE_REDIS_URL")
    if url:  # trainer actors may run elsewhere, without this host's password file: the URL carries it (in memory)
        url = redis_url_with_password(url)
    given = (("--redis-url", url), ("--features", args.features), ("--data", args.data), ("--job", args.job))
    missing = [flag for flag, value in given if not value]
    if missing or not url:  # (a missing URL is in ``missing``)
        raise ConfigError(f"serve trainer needs {', '.join(missing)}")
    config.feature_security().load()  # a bad TLS file or token fails here, before Ray or torch start
    if not (args.data / "manifest.json").is_file():
        raise ConfigError(f"--data {args.data}: not a dataset directory (no manifest.json)")
    if args.world_size is not None or args.rank is not None or args.master is not None:
        return _serve_rank(args, config, pool, url)
    from saintpipe.trainer.actor import train  # torch and Ray load only once the arguments are known to be good

    result = train(
        args.job, str(args.data), url, args.features, config, trainers=args.trainers, pool=pool,
        metrics_port=args.metrics_port, metrics_host=args.metrics_host, ray_address=args.ray_address,
    )
    _print_summary(result.summary(), args.json)
    return 0


def _serve_rank(args: argparse.Namespace, config: TrainerConfig, pool: PoolConfig, url: str) -> int:
    """One rank of a data-parallel group in this process: the code each Ray trainer actor runs."""
    from saintpipe.core.errors import ConfigError

    if args.world_size is None or args.rank is None:
        raise ConfigError("one data-parallel rank needs both --world-size and --rank")
    if not 0 <= args.rank < args.world_size:
        raise ConfigError(f"--rank must be in 0..{args.world_size - 1}, got {args.rank}")
    if args.world_size > 1 and not args.master:
        raise ConfigError("--world-size > 1 needs --master HOST:PORT (rank 0's rendezvous address)")
    if args.master and not _is_host_port(args.master):
        raise ConfigError(f"--master {args.master!r}: expected HOST:PORT")
    if args.trainers != 1 or args.ray_address:
        raise ConfigError("--world-size runs one rank without Ray: drop --trainers and --ray-address")
    from saintpipe.trainer.assemble import TrainerSpec, run_trainer

    spec = TrainerSpec(
        job=args.job, dataset_dir=str(args.data), pool_url=url, feature_addresses=args.features,
        config=config, pool=pool, metrics_port=args.metrics_port, metrics_host=args.metrics_host,
    )
    result = run_trainer(spec, args.rank, args.world_size, args.master)
    summary = {"rank": args.rank, "world_size": args.world_size, **result.summary(),
               "model_digest": result.model_digest}
    _print_summary(summary, args.json)
    return 0


def _is_host_port(value: str) -> bool:
    host, _, port = value.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def _print_summary(summary: dict, as_json: bool) -> None:
    import json

    if as_json:
        print(json.dumps(summary, default=float))
    else:
        width = max(len(k) for k in summary)
        for key, value in summary.items():
            print(f"{key.ljust(width)}  {value}")
