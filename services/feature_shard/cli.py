"""``saintpipe serve feature-shard``: serve one shard of a dataset's features over gRPC."""

from __future__ import annotations

import argparse
from pathlib import Path

from saintpipe.core.model_flags import add_model_flags
from saintpipe.services.feature_shard.config import FeatureShardConfig


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "feature-shard",
        help="serve one shard of a dataset's node features over gRPC",
        description="Serve shard K of the dataset in DIR (its memory-mapped feature rows) over gRPC, "
        "with the standard health service and optional Prometheus metrics. Prints 'listening on "
        "HOST:PORT' once ready; SIGTERM or SIGINT stops it after in-flight calls finish (--grace seconds "
        "at most). Settings: defaults < --config file ([feature_shard] section) < "
        "SAINTPIPE_FEATURE_SHARD__<FIELD> < flags. Security: --tls-cert/--tls-key turn TLS on, --tls-client-ca "
        "requires client certificates, and a token (--token-file, or the SAINTPIPE_FEATURE_TOKEN environment "
        "variable; never a flag) must then come with every call but health checks; see "
        "docs/explanation/features.md.",
    )
    # Flags that set [feature_shard] fields: made from the config model (range, default and help).
    flags = add_model_flags(parser, FeatureShardConfig, {
        "data": "--data", "shard": "--shard", "host": "--host", "port": "--port", "metrics_port": "--metrics-port",
        "max_workers": "--max-workers", "max_message_bytes": "--max-message-bytes", "chunk_bytes": "--chunk-bytes",
        "shared_memory": "--no-shared-memory", "bulk_port": "--bulk-port", "bulk": "--no-bulk",
        "grace_seconds": "--grace", "tls_cert": "--tls-cert", "tls_key": "--tls-key",
        "tls_client_ca": "--tls-client-ca", "token_file": "--token-file"})
    parser.add_argument("--config", type=Path, help="config file (TOML, YAML or JSON)")
    parser.set_defaults(func=_serve, _model_flags=flags)


def _serve(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from saintpipe.core.config import load_config
    from saintpipe.services.feature_shard.config import SECTION
    from saintpipe.services.feature_shard.metrics import start_metrics_server
    from saintpipe.services.feature_shard.server import create_server, stop_server

    log = logging.getLogger("saintpipe.services.feature_shard")
    cfg = load_config(FeatureShardConfig, args.config, flags=args._model_flags.values(args), section=SECTION)
    if cfg.tune_malloc:
        from saintpipe.core.malloc import tune_malloc

        tune_malloc()
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum, _frame) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    httpd = None
    server, port = create_server(
        cfg.data, cfg.shard, security=cfg.security(), bulk_port=cfg.bulk_port if cfg.bulk else None,
        **cfg.model_dump(include={"host", "port", "max_workers", "max_message_bytes", "chunk_bytes", "shared_memory"}),
    )
    try:
        if cfg.metrics_port is not None:
            metrics_host = cfg.metrics_host or cfg.host
            httpd, metrics_port = start_metrics_server(metrics_host, cfg.metrics_port)
            print(f"metrics on http://{metrics_host}:{metrics_port}/metrics", flush=True)
        print(f"listening on {cfg.host}:{port}", flush=True)
        log.info("feature shard %d serving %s on %s:%d", cfg.shard, cfg.data, cfg.host, port)
        while not stop.wait(0.5):
            pass
        name = signal.Signals(received[0]).name if received else "stop"
        print(f"{name}: stopping (up to {cfg.grace_seconds:g} s for in-flight calls)", flush=True)
    finally:
        stop_server(server, cfg.grace_seconds)
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    print("stopped", flush=True)
    return 0
