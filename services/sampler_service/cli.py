"""``saintpipe serve samplers``: run a job's sampler workers until a signal stops them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from saintpipe.core.model_flags import add_model_flags
from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.sampler_service.config import SamplerServiceConfig


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "samplers", help="run sampler workers that keep a job's subgraph pool full",
        description="Start N sampler workers (Ray actors, one pinned core each) that draw subgraphs from the "
        "dataset and push them to the job's Redis pool; estimate the normalization first (once per dataset and "
        "sampler configuration); restart workers that die; stop cleanly on SIGINT/SIGTERM.",
    )
    parser.add_argument("--config", type=Path, help="config file (TOML, YAML or JSON); its [samplers] section")
    # Flags that set [samplers] and its pool's fields: made from the config models (range, default and help).
    service = add_model_flags(parser, SamplerServiceConfig, ("data", "workers", "seed", "ray_address", "metrics_port",
                                                            "metrics_host", "graph", "norm_subgraphs", "normalization"))
    pool = add_model_flags(parser, PoolConfig, {"job_id": "--job", "url": "--redis-url", "capacity": "--pool-capacity",
                                                "wire": "--pool-wire"}, under="pool")
    parser.add_argument("--sampler-config", type=Path,
                        help="file with the sampler configuration (its 'sampler' section, or the whole file)")
    parser.add_argument("--sampler", dest="sampler_kind", help="sampler kind: frontier, random_walk, edge or node")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a sampler parameter, e.g. --param roots=3000 (repeatable)")
    parser.set_defaults(func=_serve, _model_flags=(service, pool))


def sampler_flags(args: argparse.Namespace) -> dict[str, Any] | None:
    """The sampler section given on the command line (file, then kind and params on top); a null in the
    file or a ``--param KEY=null`` is :data:`~saintpipe.core.config.NULL` (the field's None, not "not given")."""
    from saintpipe.core.config import NULL, read_config_file
    from saintpipe.core.errors import ConfigError

    section: dict[str, Any] = {}
    if args.sampler_config is not None:
        data = read_config_file(args.sampler_config)
        if not isinstance(data.get("sampler", data), dict):
            raise ConfigError(f"{args.sampler_config}: 'sampler' must be a table/mapping, "
                              f"got {type(data['sampler']).__name__}")
        section = {k: NULL if v is None else v for k, v in data.get("sampler", data).items()}
    if args.sampler_kind is not None:
        if section.get("kind") not in (None, args.sampler_kind):
            section = {}  # another kind: the file's parameters do not apply
        section["kind"] = args.sampler_kind
    for item in args.param:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--param {item!r}: expected KEY=VALUE")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        section[key] = NULL if value is None else value
    return section or None


def _serve(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading
    import time

    from saintpipe.core.config import load_config
    from saintpipe.core.report import plural
    from saintpipe.services.pool.connection import redact_url
    from saintpipe.services.sampler_service.config import SECTION
    from saintpipe.services.sampler_service.service import SamplerService

    service_flags, pool_flags = args._model_flags
    flags = {**service_flags.values(args), **pool_flags.values(args), "sampler": sampler_flags(args)}
    config = load_config(SamplerServiceConfig, args.config, flags, section=SECTION)
    log = logging.getLogger("saintpipe.samplers")
    stop = threading.Event()
    service = SamplerService(config)
    try:
        service.start()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        print(f"sampler service running: {plural(len(service.worker_info()), 'worker')}, job {config.job!r}, "
              f"redis {redact_url(service.redis_url)}, metrics {service.metrics_url or 'off'}", flush=True)
        last_log = time.monotonic()
        while not stop.wait(1.0):
            service.raise_if_failed()
            if time.monotonic() - last_log >= 10.0:
                stats, last_log = service.stats(), time.monotonic()
                log.info("subgraphs produced %d, restarts %d, pool %s", stats.subgraphs, stats.restarts, stats.pool)
    finally:
        service.stop()
    print("sampler service stopped", flush=True)
    return 0
