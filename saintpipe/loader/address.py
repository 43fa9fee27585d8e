"""Where a running pipeline is, as a trainer of its job is told, and the check that it answers.

A :class:`PipelineAddress` holds what ``saintpipe serve trainer`` takes (``--redis-url``, ``--job``,
``--features``, ``--data`` and the ``[pool]`` and ``[trainer]`` sections): plain values, so it travels to
DataLoader worker processes. :func:`check_reachable` opens the pool and the feature client once, each with a
short deadline, and closes them again: a loader pointed at a pipeline that is not there says which address did
not answer before any iteration starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from saintpipe.core.errors import ConfigError, ServiceUnavailable
from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.config import TrainerConfig


@dataclass(frozen=True)
class PipelineAddress:
    """A running pipeline's parts.

    Attributes:
        redis_url: the subgraph pool's Redis, ``redis://:PASSWORD@HOST:PORT/DB``.
        features: the feature shards, ``"h:p;h:p"`` (``;`` between shards, ``,`` between replicas), a list
            of replica lists, or a JSON address manifest path.
        data: the samplers' dataset directory (labels, splits, topology; its ``norm/`` for node-set entries).
        pool: the job's pool settings; ``pool.job_id`` is the job.
        trainer: the feeding settings a trainer of the job would use (``pool_timeout_s``, ``prefetch``,
            ``feature_*``); the model fields are unused.
    """

    redis_url: str
    features: str | list[list[str]]
    data: Path
    pool: PoolConfig
    trainer: TrainerConfig
    group: str | None = None

    @property
    def job(self) -> str:
        return self.pool.job_id

    def describe(self) -> str:
        """The addresses for messages, the Redis password left out."""
        from saintpipe.services.pool.connection import redact_url

        shards = self.features if isinstance(self.features, str) else ";".join(",".join(r) for r in self.features)
        return f"redis {redact_url(self.redis_url)}, job {self.job!r}, feature shards {shards}"


def check_reachable(address: PipelineAddress, timeout_s: float) -> None:
    """Open the pool and the feature client within ``timeout_s`` each, then close them.

    Raises:
        ServiceUnavailable: Redis or a feature shard did not answer (the message names its address).
        ConfigError: the dataset directory is not one; a bad URL, address, TLS file or token.
    """
    from saintpipe.services.feature_shard.client import FeatureClient
    from saintpipe.services.pool.pool import SubgraphPool

    if not (Path(address.data) / "manifest.json").is_file():
        raise ConfigError(f"data {address.data}: not a dataset directory (no manifest.json); pass the directory "
                          "the pipeline's samplers read")
    quick = address.pool.model_copy(update={"reconnect_timeout": timeout_s, "socket_timeout": max(1.0, timeout_s)})
    try:
        SubgraphPool.from_config(quick, url=address.redis_url).close()
    except ServiceUnavailable as exc:
        raise ServiceUnavailable(f"saintpipe.loader: the pipeline's pool is not reachable: {exc}") from None
    cfg = address.trainer
    try:
        FeatureClient(address.features, deadline=timeout_s, retry_deadline_s=timeout_s, name="loader-check",
                      shared_memory="off", security=cfg.feature_security()).close()
    except ServiceUnavailable as exc:
        raise ServiceUnavailable(f"saintpipe.loader: the pipeline's feature shards are not reachable: {exc}") from None
