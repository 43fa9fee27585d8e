"""``saintpipe serve feature-shard``: serve one shard of a dataset's features over gRPC."""

from __future__ import annotations

import argparse
from pathlib import Path

from saintpipe.core.argtypes import integer, port, real


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
        "variable; never a flag) must then come with every call but health checks; see docs/features.md.",
    )
    parser.add_argument("--data", type=Path, help="dataset directory")
    parser.add_argument("--shard", type=integer(0, 4095), help="index of the shard to serve (from 0)")
    parser.add_argument("--host", help="address to bind (default 127.0.0.1; 0.0.0.0 for all interfaces)")
    parser.add_argument("--port", type=port(), help="gRPC port (default 50051; 0 = a free port, printed)")
    parser.add_argument(
        "--metrics-port", type=port(), help="serve Prometheus /metrics on this port (0 = a free one)"
    )
    parser.add_argument("--max-workers", type=integer(1, 1024), help="handler threads, 1 to 1024 (default 8)")
    parser.add_argument(
        "--max-message-bytes",
        type=integer(4096, 2**31 - 1),
        help="gRPC message limit (default 64 MiB); answers up to it are one message, larger ones streamed",
    )
    parser.add_argument(
        "--chunk-bytes", type=integer(1024, 2**31 - 1), help="target size of one streamed chunk (default 1 MiB)"
    )
    parser.add_argument(
        "--no-shared-memory",
        dest="shared_memory",
        action="store_const",
        const=False,
        help="refuse shared-memory targets (same-host clients then receive rows over the socket)",
    )
    parser.add_argument(
        "--bulk-port", type=port(), help="TCP port of the bulk data plane (default 0: a free one, told to clients)"
    )
    parser.add_argument(
        "--no-bulk", dest="bulk", action="store_const", const=False,
        help="no bulk data plane: rows travel in gRPC messages only",
    )
    parser.add_argument(
        "--grace", type=real(0, 3600), dest="grace_seconds", help="seconds in-flight calls get on shutdown (0 to 3600)"
    )
    parser.add_argument("--tls-cert", type=Path, help="PEM certificate chain of this server (TLS on; with --tls-key)")
    parser.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    parser.add_argument(
        "--tls-client-ca", type=Path, help="PEM CA bundle; clients must present a certificate it signed (mTLS)"
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="file holding the token every call must carry (default: $SAINTPIPE_FEATURE_TOKEN; neither: none)",
    )
    parser.add_argument("--config", type=Path, help="config file (TOML, YAML or JSON)")
    parser.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from saintpipe.core.config import load_config
    from saintpipe.services.feature_shard.config import SECTION, FeatureShardConfig
    from saintpipe.services.feature_shard.metrics import start_metrics_server
    from saintpipe.services.feature_shard.server import create_server, stop_server

    log = logging.getLogger("saintpipe.services.feature_shard")
    flags = {
        name: getattr(args, name)
        for name in (
            "data",
            "shard",
            "host",
            "port",
            "metrics_port",
            "max_workers",
            "max_message_bytes",
            "chunk_bytes",
            "shared_memory",
            "bulk",
            "bulk_port",
            "grace_seconds",
            "tls_cert",
            "tls_key",
            "tls_client_ca",
            "token_file",
        )
    }
    cfg = load_config(FeatureShardConfig, args.config, flags=flags, section=SECTION)
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
        cfg.data,
        cfg.shard,
        host=cfg.host,
        port=cfg.port,
        max_workers=cfg.max_workers,
        max_message_bytes=cfg.max_message_bytes,
        chunk_bytes=cfg.chunk_bytes,
        shared_memory=cfg.shared_memory,
        security=cfg.security(),
        bulk_port=cfg.bulk_port if cfg.bulk else None,
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
