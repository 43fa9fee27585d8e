"""Configuration of one feature-shard server (``saintpipe serve feature-shard``).

Read with :func:`saintpipe.core.config.load_config` from defaults < config file
(section ``[feature_shard]``) < environment (``SAINTPIPE_FEATURE_SHARD__PORT=50052``)
< command-line flags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pydantic

from saintpipe.core.config import StrictModel

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
    shard: int = pydantic.Field(ge=0, description="index k of the shard to serve (manifest.shards[k])")
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
        description="target size of one answer chunk (clipped to max_message_bytes); smaller chunks pipeline "
        "reading rows with sending them",
    )
    shared_memory: bool = pydantic.Field(
        True,
        description="accept shared-memory targets: clients on this host get their rows written into a "
        "/dev/shm region they name instead of sent over the socket; false: clients use the bytes path",
    )
    grace_seconds: float = pydantic.Field(
        5.0, ge=0, description="on SIGTERM/SIGINT, time in-flight calls get to finish"
    )
    tune_malloc: bool = pydantic.Field(
        True,
        description="keep large freed buffers in the heap (glibc mallopt) so gathers do not page-fault "
        "their buffers in again; see services/feature_shard/malloc.py",
    )
