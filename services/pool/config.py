"""``PoolConfig``: the subgraph pool's settings (section ``pool`` of a config file, ``SAINTPIPE_POOL__*``)."""

from __future__ import annotations

from typing import Literal

import pydantic

from saintpipe.core.config import StrictModel

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
TRANSPORTS = ("auto", "redis", "shared_memory")
WIRES = ("auto", "full", "nodes")


class PoolConfig(StrictModel):
    """Where the pool lives and how it behaves. Every sampler and trainer of a job uses the same values."""

    url: str | None = pydantic.Field(
        default=None,
        description="Redis URL, redis://:PASSWORD@HOST:PORT/DB. None: SAINTPIPE_REDIS_URL, else a private "
        "redis-server started by the local run.",
    )
    job_id: str = pydantic.Field(
        default="default",
        pattern=JOB_ID_PATTERN,
        description="Training job; one Redis stream per job. Letters, digits and _ . : - (at most 128).",
    )
    capacity: int = pydantic.Field(
        default=256,
        ge=1,
        le=1_000_000,
        description="Most unacknowledged subgraphs the pool holds; producers wait beyond it (never dropped).",
    )
    visibility_timeout: float = pydantic.Field(
        default=30.0,
        gt=0,
        le=86_400,
        description="Seconds a delivered, unacknowledged subgraph stays with its trainer before another "
        "trainer may take it (the first trainer is presumed dead).",
    )
    transport: Literal["auto", "redis", "shared_memory"] = pydantic.Field(
        default="auto",
        description="Where producers leave subgraph bytes: 'redis' (in Redis; works across hosts), "
        "'shared_memory' (a same-host /dev/shm slot that the Redis entry references; consumers must see "
        "the same /dev/shm), or 'auto' (shared memory when the Redis URL is a loopback one). Consumers "
        "read either kind.",
    )
    wire: Literal["auto", "full", "nodes"] = pydantic.Field(
        default="auto",
        description="What samplers put in the pool: 'full' (the whole subgraph: CSR and weights, ~1.6 MB for "
        "a random walk r=3000 on a 262k-node graph), 'nodes' (its node set and how to induce it, ~14 KB; "
        "trainers induce the CSR and the weights again from their dataset directory, which must hold the "
        "samplers' normalization, DATASET/norm/), or 'auto' ('nodes' when the bytes go through Redis, i.e. "
        "transport resolves to 'redis'; 'full' with shared memory). Trainers read either.",
    )
    max_deliveries: int = pydantic.Field(
        default=5,
        ge=0,
        le=1_000_000,
        description="An entry delivered more often than this without an acknowledgement (it probably crashes "
        "the trainers that take it) goes to the job's dead-letter stream instead of to another trainer; "
        "0: no limit.",
    )
    dead_letter_limit: int = pydantic.Field(
        default=10_000,
        ge=1,
        le=100_000_000,
        description="About how many records the job's dead-letter stream keeps (older ones are trimmed).",
    )
    put_timeout: float | None = pydantic.Field(
        default=None,
        ge=0,
        le=86_400,
        description="Seconds a producer waits for room in a full pool before SaintpipeTimeout; "
        "None waits forever.",
    )
    reconnect_initial_backoff: float = pydantic.Field(
        default=0.05,
        gt=0,
        le=60,
        description="Seconds to wait after the first failed attempt to reach Redis.",
    )
    reconnect_max_backoff: float = pydantic.Field(
        default=2.0, gt=0, le=300, description="The wait between attempts doubles up to this many seconds."
    )
    reconnect_timeout: float = pydantic.Field(
        default=30.0,
        ge=0,
        le=3600,
        description="Seconds of continuous failure to reach Redis before ServiceUnavailable.",
    )
    socket_timeout: float = pydantic.Field(
        default=10.0, gt=0, le=600, description="Seconds one Redis call may take before it counts as failed."
    )
