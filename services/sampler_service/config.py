"""Configuration of the sampler service (``saintpipe serve samplers``), section ``samplers``."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from saintpipe.config import StrictModel
from services.sampler.config import SamplerConfig

SECTION = "samplers"


class SamplerServiceConfig(StrictModel):
    """Where the workers read the graph, where they push, and how many run."""

    data: Path = Field(description="dataset directory; every worker memory-maps its topology")
    job: str = Field("default", min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$",
                     description="training job id: names the pool the workers fill")
    workers: int = Field(1, ge=1, le=4096, description="sampler workers to start")
    seed: int = Field(0, ge=0, lt=2**32, description="job seed; worker w's stream derives from (seed, w)")
    sampler: SamplerConfig = Field(
        default_factory=lambda: {"kind": "random_walk", "num_roots": 3000, "walk_length": 2},
        description="sampler kind and parameters (see docs/sampler.md)",
    )
    redis_url: str | None = Field(None, description="Redis holding the pool; none: start a private redis-server")
    ray_address: str | None = Field(
        None, description="Ray cluster to join ('auto' or host:port); none or 'local': start a local Ray")
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="Prometheus endpoint port (0: a free port); none: no endpoint")
    metrics_host: str = Field("127.0.0.1", description="address the metrics endpoint binds")
    pool_capacity: int = Field(64, ge=1, description="subgraphs the pool holds before producers wait")
    visibility_timeout_s: float = Field(60.0, gt=0, description="pool: seconds before an unacknowledged entry is redelivered")
    push_poll_s: float = Field(0.25, gt=0, le=10,
                               description="how long one push waits on a full pool before checking for stop")
    norm_subgraphs: int = Field(50, ge=0, description="subgraphs pre-sampled to estimate the normalization (0: none)")
    norm_seed: int = Field(0, ge=0, lt=2**32, description="seed of the pre-sampling (part of the stored estimate)")
    num_cpus_per_worker: float = Field(1.0, gt=0, description="Ray CPUs reserved per worker (one core each)")
    max_restarts: int = Field(3, ge=0, description="Ray restarts of one worker actor before the supervisor replaces it")
    health_interval_s: float = Field(0.5, gt=0, le=60, description="how often the supervisor polls the workers")
    stop_timeout_s: float = Field(10.0, gt=0, description="how long stop() waits for a worker to finish its push")
