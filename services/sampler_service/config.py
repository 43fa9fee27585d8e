"""Configuration of the sampler service (``saintpipe serve samplers``), section ``samplers``."""

from __future__ import annotations

from pathlib import Path

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from saintpipe.core.config import StrictModel
from saintpipe.core.seeds import Seed
from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.sampler.config import EXACT_KINDS, RandomWalkConfig, SamplerConfig

SECTION = "samplers"


class SamplerServiceConfig(StrictModel):
    """Where the workers read the graph, what they draw, where they push it, and how many run."""

    data: Path = Field(description="dataset directory; every worker memory-maps its topology")
    workers: int = Field(1, ge=1, le=4096, description="sampler workers to start")
    workers_per_process: int = Field(
        1, ge=1, le=256, description="sampler workers that share one process (Ray actor), each on a thread and "
                                     "a core of its own: a further worker in a process adds its sampler's scratch, "
                                     "not another interpreter, numpy and Numba (about 120 MiB); 1: a process per "
                                     "worker, so a crash takes down one worker only")
    seed: Seed = Field(0, description="job seed; subgraph s of worker w is drawn with a seed "
                                                     "derived from (seed, w, s)")
    sampler: SamplerConfig = Field(default_factory=RandomWalkConfig,
                                   description="sampler kind and parameters (docs/explanation/sampler.md)")
    graph: Literal["auto", "full", "train"] = Field(
        "auto", description="the graph subgraphs are drawn from: full = the whole graph (transductive: the split "
                            "only sets loss weights); train = the graph induced by the training nodes (inductive, "
                            "GraphSAINT's protocol: validation and test nodes never appear in training; built once "
                            "and stored with the dataset); auto = the dataset manifest's sample_graph (train for "
                            "a GraphSAINT-format import, else full)")
    pool: PoolConfig = Field(default_factory=PoolConfig,
                             description="the job's pool (url none: SAINTPIPE_REDIS_URL, else a private redis-server)")
    ray_address: str | None = Field(
        None, description="Ray cluster to join ('auto' or host:port); none or 'local': start a local Ray")
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="Prometheus endpoint port (0: a free port); none: no endpoint")
    metrics_host: str = Field("127.0.0.1", description="address the metrics endpoint binds")
    push_poll_s: float = Field(1.0, gt=0, le=60,
                               description="how long one push waits on a full pool before checking for stop")
    norm_subgraphs: int | None = Field(
        None, ge=0, le=10_000_000, description="subgraphs pre-sampled to estimate the normalization; 0: no "
                                               "normalization (plain mean aggregation, uniform loss); none: sized "
                                               "by norm_coverage")
    norm_coverage: float = Field(100.0, gt=0, le=10_000,
                                 description="when norm_subgraphs is none: pre-sample enough subgraphs that each "
                                             "training node is drawn this many times on average")
    norm_seed: Seed = Field(0, description="seed of the pre-sampling")
    normalization: Literal["auto", "exact", "online", "smoothed", "reference", "none"] = Field(
        "auto", description="GraphSAINT's coefficients (docs/explanation/trainer.md): exact = closed-form "
                            "probabilities "
                            "(node and edge samplers, no pre-sampling); online = start at once on the prior, "
                            "refined from the subgraphs produced; smoothed = pre-sampled counts shrunk toward "
                            "the prior; reference = pre-sampled counts with GraphSAINT's floors (its reference "
                            "code, bit for bit); none = plain mean aggregation; auto = exact where it exists, "
                            "else online")
    norm_strength: float | None = Field(
        None, gt=0, le=1e9, description="smoothed and online: the prior's weight in pseudo-subgraphs; none: the "
                                        "estimator's default")
    num_cpus_per_worker: float = Field(1.0, gt=0, le=1024, description="Ray CPUs reserved per worker (one core each)")
    max_restarts: int = Field(3, ge=0, le=1_000_000, description="Ray restarts of one worker actor before the "
                                                                 "supervisor replaces it with a new actor")
    max_consecutive_failures: int = Field(
        5, ge=1, le=1_000_000, description="failed runs of one worker, with no subgraph pushed in between, after "
                                           "which the service gives up and reports the error")
    health_interval_s: float = Field(0.5, gt=0, le=60, description="how often the supervisor polls the workers")
    stop_timeout_s: float = Field(10.0, gt=0, le=3600, description="how long stop() waits for a worker's last push")

    @model_validator(mode="after")
    def _closed_form_exists(self) -> "SamplerServiceConfig":
        if self.normalization == "exact" and self.sampler.kind not in EXACT_KINDS:
            raise ValueError(f"normalization: 'exact' needs closed-form probabilities, which the {self.sampler.kind} "
                             f"sampler has not (only {' and '.join(EXACT_KINDS)}); use online, smoothed or reference")
        return self

    def normalization_method(self) -> str:
        """The estimator this service uses: ``normalization`` with ``auto`` resolved (``none`` when
        ``norm_subgraphs`` is 0, as before the estimators existed)."""
        if self.norm_subgraphs == 0 or self.normalization == "none":
            return "none"
        if self.normalization == "auto":
            return "exact" if self.sampler.kind in EXACT_KINDS else "online"
        return self.normalization

    @property
    def job(self) -> str:
        return self.pool.job_id

    @field_validator("sampler", mode="before")
    @classmethod
    def _default_kind(cls, value: Any) -> Any:
        # Parameters given without a kind (e.g. only --param roots=100) refine the default sampler.
        if isinstance(value, dict) and "kind" not in value:
            return {"kind": RandomWalkConfig().kind, **value}
        return value

    def presamples(self, num_train: int) -> int:
        """Subgraphs to pre-sample for the normalization of a dataset with ``num_train`` training nodes."""
        from saintpipe.services.sampler.normalization import presample_count

        if self.norm_subgraphs is not None:
            return self.norm_subgraphs
        return presample_count(self.sampler, num_train, self.norm_coverage)
