"""Trainers as Ray actors: one per trainer, a GPU each when Ray offers one, data-parallel when several.

Callers use :func:`train` (or :class:`TrainerGroup` to hold the actors); the
actor class itself stays private, as Ray's own ``ray.util.queue`` does.

Example::

    result = train("cora-gcn", "data/cora", "redis://:pw@127.0.0.1:6379/0", "127.0.0.1:50051;127.0.0.1:50052",
                   TrainerConfig(epochs=50), trainers=2)
    print(result.test_score, result.times.data_wait)
"""

from __future__ import annotations

import logging
from dataclasses import replace

from saintpipe.core.credentials import check_ray_token
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.config import TrainerConfig
from saintpipe.trainer.loop import TrainResult
from saintpipe.trainer.timing import TimeBreakdown
from saintpipe.trainer.worker import TrainerSpec

log = logging.getLogger(__name__)


class _TrainerActor:
    """Runs :func:`saintpipe.trainer.worker.run_trainer` for one rank inside a Ray worker process."""

    def __init__(self, spec: TrainerSpec, rank: int, world_size: int) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.spec, self.rank, self.world_size = spec, rank, world_size

    def rendezvous(self) -> str:
        """Rank 0: a ``host:port`` the others can reach for the process group."""
        import ray

        from saintpipe.trainer.distributed import free_port

        # One node: loopback. Several: the address Ray itself uses to reach this node.
        alive = [n for n in ray.nodes() if n.get("Alive")]
        host = "127.0.0.1" if len(alive) <= 1 else ray.util.get_node_ip_address()
        return f"{host}:{free_port(host)}"

    def run(self, master: str | None) -> TrainResult:
        from saintpipe.trainer.worker import run_trainer

        return run_trainer(self.spec, self.rank, self.world_size, master)


class TrainerGroup:
    """``trainers`` Ray actors training one job data-parallel.

    Args:
        spec: the job (see :class:`~saintpipe.trainer.worker.TrainerSpec`).
        trainers: how many trainers (data-parallel ranks).
        cpus_per_trainer: CPUs Ray reserves for each actor.
        use_gpus: give each actor one GPU (default: when Ray's cluster has one free per trainer).

    Raises:
        InvalidArgument: ``trainers < 1``.
    """

    def __init__(
        self,
        spec: TrainerSpec,
        trainers: int = 1,
        *,
        cpus_per_trainer: float = 1.0,
        use_gpus: bool | None = None,
    ) -> None:
        import ray

        if trainers < 1:
            raise InvalidArgument(f"trainers must be >= 1, got {trainers}")
        if use_gpus is None:
            use_gpus = ray.available_resources().get("GPU", 0) >= trainers
        remote = ray.remote(num_cpus=cpus_per_trainer, num_gpus=1 if use_gpus else 0)(_TrainerActor)
        self.spec, self.trainers, self.use_gpus = spec, trainers, use_gpus
        self.actors = [remote.remote(rank_spec(spec, rank), rank, trainers) for rank in range(trainers)]
        log.info(
            "started %d trainer actor(s) for job %s (%s)", trainers, spec.job, "GPU" if use_gpus else "CPU"
        )

    def run(self) -> list[TrainResult]:
        """Train to the end; returns every trainer's result (rank 0's carries the scores)."""
        import ray

        master = ray.get(self.actors[0].rendezvous.remote()) if self.trainers > 1 else None
        return ray.get([actor.run.remote(master) for actor in self.actors])

    def shutdown(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)


def rank_spec(spec: TrainerSpec, rank: int) -> TrainerSpec:
    """``spec`` for rank ``rank`` of a group on shared hosts: its metrics on ``metrics_port + rank``."""
    if not spec.metrics_port:  # None (no endpoint) or 0 (a free port each)
        return spec
    return replace(spec, metrics_port=spec.metrics_port + rank)


def merge_results(results: list[TrainResult], check: bool = True) -> TrainResult:
    """One summary for the group: rank 0's scores and counters; times, subgraphs and feature figures summed over
    ranks.

    Args:
        check: compare the ranks' weights (off for snapshots taken while they step).

    Raises:
        RuntimeError: the trainers ended with different weights (the gradient averaging broke).
    """
    lead = results[0]
    digests = {r.model_digest for r in results}
    if check and len(digests) > 1:
        raise RuntimeError(f"data-parallel trainers ended with different weights: {sorted(digests)}")
    return replace(
        lead,
        subgraphs=sum(r.subgraphs for r in results),
        times=TimeBreakdown.merged([r.times for r in results]),
        redelivered=sum(r.redelivered for r in results),
        feature_gathers=sum(r.feature_gathers for r in results),
        feature_rows=sum(r.feature_rows for r in results),
        feature_cache_hits=sum(r.feature_cache_hits for r in results),
        feature_bytes=sum(r.feature_bytes for r in results),
    )


def train(
    job: str,
    dataset_dir: str,
    pool_url: str,
    feature_addresses,
    config: TrainerConfig | None = None,
    *,
    trainers: int = 1,
    pool: PoolConfig | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    cpus_per_trainer: float = 1.0,
    ray_address: str | None = None,
) -> TrainResult:
    """Train ``job`` with ``trainers`` Ray actors fed by the pool and the feature service.

    Starts a local Ray (``ray.init()``) when none is running and ``ray_address``
    is not given, and stops it again at the end; an existing Ray is reused.

    Args:
        job: the training job; its subgraphs are in the pool stream of that name.
        dataset_dir: the dataset directory (topology, labels and splits are read from it).
        pool_url: Redis URL of the subgraph pool.
        feature_addresses: feature shard addresses (``"h:p;h:p"``, lists, or a manifest path).
        config: the trainer configuration (default :class:`TrainerConfig`).
        trainers: data-parallel trainers (gradients averaged every step).
        pool: the job's pool settings (its ``job_id`` is replaced by ``job``).
        metrics_port: trainer r serves /metrics on ``metrics_port + r`` (0: free ports; None: none).
        metrics_host: address the metrics endpoints bind.
        cpus_per_trainer: CPUs reserved per actor.
        ray_address: an existing Ray cluster to join (``ray.init(address=...)``).

    Returns:
        The merged :class:`~saintpipe.trainer.loop.TrainResult`: test score, epochs, subgraphs and the time breakdown.
    """
    import ray

    spec = TrainerSpec(
        job=job,
        dataset_dir=str(dataset_dir),
        pool_url=pool_url,
        feature_addresses=feature_addresses,
        config=config or TrainerConfig(),
        pool=pool or PoolConfig(),
        metrics_port=metrics_port,
        metrics_host=metrics_host,
    )
    started = False
    if not ray.is_initialized():
        if ray_address not in (None, "local"):
            check_ray_token()
        ray.init(address=ray_address, include_dashboard=False, log_to_driver=True)
        started = True
    group = TrainerGroup(spec, trainers, cpus_per_trainer=cpus_per_trainer)
    try:
        return merge_results(group.run())
    finally:
        group.shutdown()
        if started:
            ray.shutdown()
