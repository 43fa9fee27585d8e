"""Configuration of one feature-shard server (``saintpipe serve feature-shard``).

Read with :func:`saintpipe.core.config.load_config` from defaults < config file
(section ``[feature_shard]``) < environment (``SAINTPIPE_FEATURE_SHARD__PORT=50052``)
< command-line flags. The token itself is never a setting here: it is read
from ``token_file`` or the ``SAINTPIPE_FEATURE_TOKEN`` environment variable
(:mod:`saintpipe.services.feature_shard.security`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import pydantic

from saintpipe.core.config import StrictModel
from saintpipe.services.feature_shard.security import TOKEN_ENV, ServerSecurity

SECTION = "feature_shard"
# 64 MiB: one message holds the answer to a typical minibatch (8,000 rows x 602 float32 = 19 MB),
# so most gathers are one unary call; larger answers are streamed in chunks.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_CHUNK_BYTES = 1024 * 1024
# FeatureClient(shared_memory=...): "auto" = per replica, shared memory where a probe shows the server sees
# this host's /dev/shm, bytes elsewhere; "on" = require it (an error where a replica cannot); "off" = bytes.
SharedMemoryMode = Literal["auto", "on", "off"]
SHARED_MEMORY_MODES: tuple[str, ...] = ("auto", "on", "off")


class FeatureShardConfig(StrictModel):
    """One shard server: which rows it serves and where."""

    data: Path = pydantic.Field(
        description="dataset directory (holds manifest.json and features/shard-*.npy)"
    )
    shard: int = pydantic.Field(ge=0, le=4095, description="index k of the shard to serve (manifest.shards[k])")
    host: str = pydantic.Field(
        "127.0.0.1",
        min_length=1,
        description="address to bind; 0.0.0.0 to accept connections from other hosts",
    )
    port: int = pydantic.Field(50051, ge=0, le=65535, description="gRPC port; 0 picks a free one (printed)")
    metrics_port: int | None = pydantic.Field(
        None,
        ge=0,
        le=65535,
        description="Prometheus /metrics port; unset = no metrics endpoint; 0 = a free one",
    )
    metrics_host: str | None = pydantic.Field(
        None, description="address of the metrics endpoint (default: host)"
    )
    max_workers: int = pydantic.Field(8, ge=1, le=1024, description="gRPC handler threads (concurrent calls)")
    max_message_bytes: int = pydantic.Field(
        DEFAULT_MAX_MESSAGE_BYTES,
        ge=4096,
        le=2**31 - 1,
        description="largest gRPC message sent or received; larger answers are split into chunks",
    )
    chunk_bytes: int = pydantic.Field(
        DEFAULT_CHUNK_BYTES,
        ge=1024,
        le=2**31 - 1,
        description="target size of one answer chunk (clipped to max_message_bytes); smaller chunks pipeline "
        "reading rows with sending them",
    )
    shared_memory: bool = pydantic.Field(
        True,
        description="accept shared-memory targets: clients on this host get their rows written into a "
        "/dev/shm region they name instead of sent over the socket; false: clients use the bytes path",
    )
    bulk: bool = pydantic.Field(
        True,
        description="also serve gathers on the bulk data plane (rows as one TCP stream, received straight into "
        "the client's array; same TLS and token); false: clients use gRPC for the rows too",
    )
    bulk_port: int = pydantic.Field(
        0, ge=0, le=65535,
        description="TCP port of the bulk data plane on host; 0 picks a free one (clients learn it from Info)",
    )
    grace_seconds: float = pydantic.Field(
        5.0, ge=0, le=3600, description="on SIGTERM/SIGINT, time in-flight calls get to finish"
    )
    tune_malloc: bool = pydantic.Field(
        True,
        description="keep large freed buffers in the heap (glibc mallopt) so gathers do not page-fault "
        "their buffers in again; see saintpipe/core/malloc.py",
    )
    tls_cert: Path | None = pydantic.Field(
        None, description="PEM certificate chain of this server: the port speaks TLS only (with tls_key)"
    )
    tls_key: Path | None = pydantic.Field(None, description="PEM private key of tls_cert")
    tls_client_ca: Path | None = pydantic.Field(
        None, description="PEM CA bundle: clients must present a certificate it signed (mutual TLS)"
    )
    token_file: Path | None = pydantic.Field(
        None,
        description=f"file holding the token every call but health checks must carry (default: the {TOKEN_ENV} "
        "environment variable; neither: no token)",
    )

    def security(self, environ: Mapping[str, str] | None = None) -> ServerSecurity:
        """The security settings, the token from :data:`TOKEN_ENV` (``environ``, default ``os.environ``) when no
        ``token_file`` is set; errors name the setting as ``feature_shard.X (--x)``."""
        fields = ("tls_cert", "tls_key", "tls_client_ca", "token_file")
        settings = ServerSecurity(**{f: getattr(self, f) for f in fields})
        settings.named({f: f"{SECTION}.{f} (--{f.replace('_', '-')})" for f in fields})
        return settings.with_env_token(environ)
