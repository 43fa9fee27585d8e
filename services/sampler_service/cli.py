"""``saintpipe serve samplers``: run a job's sampler workers until a signal stops them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from saintpipe.core.argtypes import integer, port, seed


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "samplers", help="run sampler workers that keep a job's subgraph pool full",
        description="Start N sampler workers (Ray actors, one pinned core each) that draw subgraphs from the "
        "dataset and push them to the job's Redis pool; estimate the normalization first (once per dataset and "
        "sampler configuration); restart workers that die; stop cleanly on SIGINT/SIGTERM.",
    )
    parser.add_argument("--config", type=Path, help="config file (TOML, YAML or JSON); its [samplers] section")
    parser.add_argument("--data", type=Path, help="dataset directory")
    parser.add_argument("--job", help="training job id (names the pool)")
    parser.add_argument("--workers", type=integer(1, 4096), help="number of sampler workers (1 to 4096)")
    parser.add_argument("--seed", type=seed(), help="job seed (0 to 2^63-1)")
    parser.add_argument("--ray-address", help="Ray cluster ('auto', host:port) or 'local' (default: start a local Ray)")
    parser.add_argument("--redis-url", help="Redis holding the pool (default: start a private redis-server)")
    parser.add_argument("--metrics-port", type=port(), help="Prometheus endpoint port (0: any free port)")
    parser.add_argument("--metrics-host", help="address of the metrics endpoint (default 127.0.0.1)")
    parser.add_argument("--pool-capacity", type=integer(1, 1_000_000),
                        help="subgraphs the pool holds before workers wait")
    parser.add_argument("--pool-wire", choices=["auto", "full", "nodes"],
                        help="what workers put in the pool: whole subgraphs (full), node sets that trainers induce "
                             "again from their dataset (nodes: ~100x fewer bytes), or auto (nodes when the bytes go "
                             "through Redis; default)")
    parser.add_argument("--graph", choices=["auto", "full", "train"],
                        help="the graph subgraphs are drawn from: full (the whole graph), train (the graph induced "
                             "by the training nodes, GraphSAINT's inductive protocol; built once and stored with the "
                             "dataset) or auto (the dataset's own choice: train for a GraphSAINT import; default)")
    parser.add_argument("--norm-subgraphs", type=integer(0, 10_000_000),
                        help="subgraphs pre-sampled for the normalization estimate (default: each training node "
                             "drawn about 100 times; 0: no normalization, plain mean aggregation)")
    parser.add_argument("--normalization", choices=["auto", "exact", "online", "smoothed", "reference", "none"],
                        help="how GraphSAINT's coefficients are made (default auto: exact for node and edge "
                             "samplers, online for random_walk and frontier; docs/trainer.md)")
    parser.add_argument("--sampler-config", type=Path,
                        help="file with the sampler configuration (its 'sampler' section, or the whole file)")
    parser.add_argument("--sampler", dest="sampler_kind", help="sampler kind: frontier, random_walk, edge or node")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a sampler parameter, e.g. --param roots=3000 (repeatable)")
    parser.set_defaults(func=_serve)


def sampler_flags(args: argparse.Namespace) -> dict[str, Any] | None:
    """The sampler section given on the command line (file, then kind and params on top)."""
    from saintpipe.core.config import read_config_file
    from saintpipe.core.errors import ConfigError

    section: dict[str, Any] = {}
    if args.sampler_config is not None:
        data = read_config_file(args.sampler_config)
        if not isinstance(data.get("sampler", data), dict):
            raise ConfigError(f"{args.sampler_config}: 'sampler' must be a table/mapping, "
                              f"got {type(data['sampler']).__name__}")
        section = dict(data.get("sampler", data))
    if args.sampler_kind is not None:
        if section.get("kind") not in (None, args.sampler_kind):
            section = {}  # another kind: the file's parameters do not apply
        section["kind"] = args.sampler_kind
    for item in args.param:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--param {item!r}: expected KEY=VALUE")
        try:
            section[key] = json.loads(raw)
        except json.JSONDecodeError:
            section[key] = raw
    return section or None


def _serve(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading
    import time

    from saintpipe.core.config import load_config
    from saintpipe.core.report import plural
    from saintpipe.services.pool.connection import redact_url
    from saintpipe.services.sampler_service.config import SECTION, SamplerServiceConfig
    from saintpipe.services.sampler_service.service import SamplerService

    pool = {"url": args.redis_url, "job_id": args.job, "capacity": args.pool_capacity, "wire": args.pool_wire}
    flags = {
        "data": args.data, "workers": args.workers, "seed": args.seed, "ray_address": args.ray_address,
        "metrics_port": args.metrics_port, "metrics_host": args.metrics_host,
        "norm_subgraphs": args.norm_subgraphs, "normalization": args.normalization, "sampler": sampler_flags(args),
        "graph": args.graph,
        "pool": {k: v for k, v in pool.items() if v is not None} or None,
    }
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
