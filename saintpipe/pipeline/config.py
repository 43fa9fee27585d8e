"""Configuration of ``saintpipe run``: the services' own config models, composed.

One file configures the whole local run. Its sections are the ones each service reads on its own (``[pool]``,
``[samplers]``, ``[trainer]``) plus ``[run]`` for what only the all-in-one runner decides (how many trainers,
where metrics bind, time limits). Precedence is :func:`saintpipe.core.config.load_config`'s: defaults < file <
``SAINTPIPE_<SECTION>__<FIELD>`` < flags.

What the runner wires itself (the dataset directory, the Redis URL it started, the Ray cluster, the metrics
ports) is not set in ``[samplers]``: setting those fields there is an error that says where they belong.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from saintpipe.core.config import StrictModel, deep_merge, load_config
from saintpipe.services.feature_shard.cache import CacheConfig
from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.sampler_service.config import SamplerServiceConfig
from saintpipe.trainer.config import TrainerConfig

# The local run's workers share this one host, so by default they share processes too: a further thread
# costs its scratch, a further process another interpreter (docs/explanation/local-run.md). The cap bounds
# the workers that take turns on one interpreter lock for their Python part (the pushes).
LOCAL_WORKERS_PER_PROCESS = 8

# Defaults of the local run where they differ from the services' own, sized for the demo dataset (30,000
# nodes, 8 classes) on a 2-core laptop: small subgraphs give several steps per epoch, so the loss curve is
# visible and a few minutes reach a test accuracy far above chance (1/8). They sit under the config file, the
# environment and the flags (merged field by field).
LOCAL_DEFAULTS: dict[str, Any] = {
    "pool": {"job_id": "local", "capacity": 32},
    "samplers": {"sampler": {"kind": "random_walk", "roots": 1000, "walk_length": 2}},
    "trainer": {"epochs": 30, "patience": 8, "model": {"arch": "sage", "hidden": [128, 128]}},
}



class RunConfig(StrictModel):
    """What only the all-in-one runner decides."""

    data: Path | None = Field(None, description="dataset directory; none: the built-in demo dataset")
    trainers: int = Field(1, ge=1, le=64, description="trainer actors (data-parallel)")
    ray_num_cpus: int | None = Field(
        None, ge=1, le=4096, description="CPUs of the local Ray cluster; none: os.cpu_count()")
    shard_replicas: int = Field(1, ge=1, le=16, description="feature-shard processes per shard (clients fail "
                                                             "over between replicas)")
    metrics: bool = Field(True, description="serve every component's Prometheus endpoint on a free port")
    metrics_host: str = Field("127.0.0.1", description="address the sampler and trainer metrics endpoints bind "
                                                     "(feature shards serve theirs on loopback)")
    progress: bool = Field(True, description="a tqdm bar per epoch on stderr")
    watch_interval_s: float = Field(0.5, gt=0, le=10, description="how often the runner checks its children")
    startup_timeout_s: float = Field(120.0, gt=0, le=86_400, description="longest wait for one component to come up")
    stop_grace_s: float = Field(10.0, gt=0, le=3600, description="how long a child gets after SIGTERM before SIGKILL")
    max_seconds: float | None = Field(
        None, gt=0, le=366 * 86_400,
        description="stop training after this long (the summary still runs); none: no limit")
    max_restarts: int = Field(
        3, ge=0, le=1000, description="restarts of one component (a trainer, a feature shard, Redis; a sweep's "
                                      "trial) allowed within restart_window_s; one failure more ends the run (a "
                                      "sweep: fails the trial) (0: never restart)")
    restart_window_s: float = Field(600.0, gt=0, le=7 * 86_400,
                                    description="the sliding window of max_restarts, in seconds")
    run_dir: Path | None = Field(
        None, description="the run directory: config.json, checkpoints/, metrics.jsonl, best.pt, final.pt and "
                          "summary.json (docs/how-to/local-run.md); none: a new $SAINTPIPE_HOME/runs/<time>-<job>")
    checkpoints: bool = Field(
        True, description="checkpoint the trainers (to the run directory's checkpoints/, or [trainer] "
                          "checkpoint_dir), so a restarted trainer or `saintpipe run --resume` goes on; off: the "
                          "run directory still gets the models, the metrics and the summary, but cannot be resumed")


# The [samplers] fields the runner wires itself (a config refuses them; config.json leaves them out), and where
# a user sets each instead.
RUNNER_OWNED = {"data": "[run] data or --data", "pool": "the [pool] section",
                "ray_address": "nowhere: `saintpipe run` starts its own local Ray",
                "metrics_port": "[run] metrics", "metrics_host": "[run] metrics_host"}


class SamplersSection(SamplerServiceConfig):
    """The sampler service's own settings (``[samplers]``), minus what the runner wires."""

    data: Path | None = Field(  # type: ignore[assignment]
        None, description="set by the runner: the run's dataset ([run] data / --data)")
    workers: int | None = Field(  # type: ignore[assignment]
        None, ge=1, le=4096, description="sampler workers; none: the cores left after the trainers (at least 1)")
    workers_per_process: int | None = Field(  # type: ignore[assignment]
        None, ge=1, le=256, description="sampler workers that share one process, each on a thread and a core of "
                                        "its own; none: the run's workers in processes of up to "
                                        f"{LOCAL_WORKERS_PER_PROCESS} (all on this one host, so a further worker "
                                        "adds its sampler's scratch, not another interpreter); 1: a process "
                                        "per worker, so a crash takes down one worker only")

    @model_validator(mode="after")
    def _runner_owned(self) -> "SamplersSection":
        wrong = [f"samplers.{name} (set it in {where})" for name, where in RUNNER_OWNED.items()
                 if name in self.model_fields_set]
        if wrong:
            raise ValueError("the local run sets these itself: " + "; ".join(wrong))
        return self


class PipelineConfig(StrictModel):
    """Everything ``saintpipe run`` starts, one section per service."""

    run: RunConfig = Field(default_factory=RunConfig)
    pool: PoolConfig = Field(default_factory=PoolConfig, description="the job's pool; url none: a private redis-server")
    samplers: SamplersSection = Field(default_factory=SamplersSection)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    feature_cache: CacheConfig | None = Field(
        None, description="the trainers' feature cache in rows; none: the 10% highest-degree nodes pinned "
                          "plus an LRU part of 20% of the nodes")

    @model_validator(mode="before")
    @classmethod
    def _local_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        defaults = copy.deepcopy(LOCAL_DEFAULTS)
        sampler = (data.get("samplers") or {}).get("sampler") if isinstance(data.get("samplers"), dict) else None
        if isinstance(sampler, dict) and sampler.get("kind", defaults["samplers"]["sampler"]["kind"]) != \
                defaults["samplers"]["sampler"]["kind"]:
            del defaults["samplers"]["sampler"]  # another kind: the demo's random-walk parameters do not apply
        return deep_merge(defaults, data)

    def sampler_workers(self, cpus: int) -> int:
        """Workers to start: as configured, else the CPUs the trainers leave free (at least one)."""
        if self.samplers.workers is not None:
            return self.samplers.workers
        return max(1, cpus - self.run.trainers)

    def sampler_workers_per_process(self, cpus: int) -> int:
        """Workers per sampler process: as configured, else all the run's workers, up to the local cap."""
        if self.samplers.workers_per_process is not None:
            return self.samplers.workers_per_process
        return min(self.sampler_workers(cpus), LOCAL_WORKERS_PER_PROCESS)

    def sampler_service_config(self, data: Path, redis_url: str, cpus: int, num_train: int) -> SamplerServiceConfig:
        """The sampler service's config for this run: its section plus what the runner wired."""
        fields: dict[str, Any] = self.samplers.model_dump(exclude={*RUNNER_OWNED, "workers", "workers_per_process",
                                                                   "norm_subgraphs"})
        return SamplerServiceConfig(
            **fields, data=data, workers=self.sampler_workers(cpus),
            workers_per_process=self.sampler_workers_per_process(cpus), norm_subgraphs=self.samplers.presamples(num_train),
            pool=self.pool.model_copy(update={"url": redis_url}),
            metrics_port=0 if self.run.metrics else None, metrics_host=self.run.metrics_host,
        )

    def feature_cache_rows(self, num_nodes: int) -> CacheConfig:
        """The trainers' feature cache for a graph of ``num_nodes`` nodes."""
        if self.feature_cache is not None:
            return self.feature_cache
        return CacheConfig(static_rows=num_nodes // 10, lru_rows=num_nodes // 5)

    def cores(self) -> int:
        """The cores the run sizes itself to: ``[run] ray_num_cpus``, else this machine's."""
        return self.run.ray_num_cpus or os.cpu_count() or 1

    def ray_cpus(self) -> int:
        """Logical CPUs of the local Ray: the cores, or more when the actors need more (they then share)."""
        cores = self.cores()
        return max(cores, self.sampler_workers(cores) + self.run.trainers)


def load_pipeline_config(path: Path | None = None, data: Path | None = None,
                         environ: dict[str, str] | None = None, *, run_dir: Path | None = None,
                         stored: Path | None = None) -> PipelineConfig:
    """Defaults < ``stored`` < ``path`` < ``SAINTPIPE_<SECTION>__<FIELD>`` < ``--data``, ``--run-dir``.

    Args:
        stored: a run directory's config.json (``saintpipe run --resume``): the run's configuration, which
            the file, the environment and the flags given now still override.

    Raises:
        ConfigError: naming the file or variable and the field at fault.
    """
    from saintpipe.core.config import read_config_file

    run = {k: v for k, v in {"data": data, "run_dir": run_dir}.items() if v is not None}
    base = (str(stored), read_config_file(stored)) if stored is not None else None
    return load_config(PipelineConfig, path, {"run": run} if run else None, environ, base=base)
