"""Trainers as Ray actors: one per trainer, a GPU each when Ray offers one, data-parallel when several.

Callers use :func:`train` (or :class:`TrainerGroup` to hold the actors);
:class:`TrainerActor` is the one actor class, which a run's trainers
(:mod:`saintpipe.pipeline.trainers`) use too.

Example::

    result = train("cora-gcn", "data/cora", "redis://:pw@127.0.0.1:6379/0", "127.0.0.1:50051;127.0.0.1:50052",
                   TrainerConfig(epochs=50), trainers=2)
    print(result.test_score, result.times.data_wait)
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import replace
from typing import Any

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.assemble import AssembledTrainer, TrainerSpec, assemble_trainer
from saintpipe.trainer.config import TrainerConfig
from saintpipe.trainer.loop import TrainResult
from saintpipe.trainer.progress import TrainerProgress
from saintpipe.trainer.timing import TimeBreakdown

log = logging.getLogger(__name__)


class TrainerActor:
    """One rank in a Ray worker process: :meth:`prepare` assembles it, :meth:`run` trains.

    A threaded actor (``max_concurrency`` above 1) also answers :meth:`progress`, :meth:`finish_at` and the
    evaluation questions while :meth:`run` trains: what a console run shows and steers.

    Args:
        spec: the job. rank, world_size: this rank's place in the data-parallel group.
        threads: torch threads when ``[trainer] threads`` is 0 (0: torch's default).
        cache: the feature client's cache sizes (``CacheConfig`` fields), or None.
    """

    def __init__(self, spec: TrainerSpec, rank: int, world_size: int, *, threads: int = 0,
                 cache: dict[str, int] | None = None) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.spec, self.rank, self.world_size, self.threads, self.cache = spec, rank, world_size, threads, cache
        self.trainer: AssembledTrainer | None = None
        self._lock = threading.Lock()

    def rendezvous(self) -> str:
        """Rank 0: a ``host:port`` the others can reach for the data-parallel process group."""
        import ray

        from saintpipe.trainer.distributed import free_port

        # One node: loopback. Several: the address Ray itself uses to reach this node.
        alive = [n for n in ray.nodes() if n.get("Alive")]
        host = "127.0.0.1" if len(alive) <= 1 else ray.util.get_node_ip_address()
        return f"{host}:{free_port(host)}"

    def prepare(self, master: str | None, metrics_port: int | None = None) -> str | None:
        """Assemble this rank (dataset, pool, features, group, loop); returns its metrics URL.

        Rank r serves its metrics on ``spec.metrics_port + r`` (ranks may share a host), or on
        ``metrics_port`` when given (a restarted rank keeps the endpoint the run announced).
        """
        from saintpipe.services.feature_shard.cache import CacheConfig

        spec = self.spec
        port = None
        if spec.metrics_port is not None:
            port = metrics_port or (spec.metrics_port + self.rank if spec.metrics_port else 0)
        cache = CacheConfig.model_validate(self.cache) if self.cache else None
        self.trainer = assemble_trainer(spec, self.rank, self.world_size, master, threads=self.threads,
                                        metrics_port=port, cache=cache)
        return self.trainer.metrics_url

    def run(self) -> TrainResult:
        """Train to the end (epochs, max_steps, early stopping); returns the loop's TrainResult."""
        if self.trainer is None:  # prepare() assembles it (what `None.run` raised before)
            raise AttributeError("this trainer actor was not prepared")
        return self.trainer.run()

    def progress(self) -> TrainerProgress:
        trainer = self.trainer
        if trainer is None:
            return TrainerProgress()
        loop, metrics = trainer.loop, trainer.metrics
        p, e = loop.progress, loop.watch.status
        return TrainerProgress(epoch=p.epoch, epoch_fraction=p.epoch_fraction, steps=loop.state.steps,
                               subgraphs=p.subgraphs, loss=metrics.last_loss, val_score=metrics.last_val,
                               evaluating=e.running, evaluation=e.phase, evaluation_fraction=e.fraction,
                               evaluation_s=e.elapsed_s, first_subgraph_at=loop.first_subgraph_at,
                               first_step_at=loop.first_step_at)

    def finish_at(self, steps: int) -> None:
        """End training once ``steps`` optimizer steps are done (every rank gets the same target)."""
        if self.trainer is not None:
            self.trainer.loop.config.max_steps = max(1, steps)

    def evaluation_estimate(self) -> tuple[float, bool]:
        """Seconds one full-graph evaluation takes on this rank (measured, else estimated; NaN: not ready), and
        whether the end of training needs one (not when the best validation's pass scored the test split)."""
        with self._lock:  # one estimate at a time; the loop caches it
            if self.trainer is None:
                return math.nan, True
            return self.trainer.loop.evaluation_estimate(), self.trainer.loop.needs_final_evaluation

    def cancel_validation(self) -> None:
        """Cut a validation running now (the run's end is near: its final scoring goes first)."""
        if self.trainer is not None:
            self.trainer.loop.watch.cancel()

    def cut_evaluation_at(self, deadline: float | None) -> None:
        """Cut any evaluation still running at ``deadline`` (``time.time()``)."""
        if self.trainer is not None:
            self.trainer.loop.watch.cut_at(deadline)

    def snapshot(self) -> TrainResult | None:
        """The TrainResult so far, without scoring (for a run that ends before this rank's loop returns)."""
        return self.trainer.loop.snapshot() if self.trainer is not None else None


class TrainerGroup:
    """``trainers`` Ray actors training one job data-parallel.

    Args:
        spec: the job (see :class:`~saintpipe.trainer.assemble.TrainerSpec`).
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
        remote = ray.remote(num_cpus=cpus_per_trainer, num_gpus=1 if use_gpus else 0)(TrainerActor)
        self.spec, self.trainers, self.use_gpus = spec, trainers, use_gpus
        # Any: ray's annotations give an actor's methods no `.remote`.
        self.actors: list[Any] = [remote.remote(spec, rank, trainers) for rank in range(trainers)]
        log.info(
            "started %d trainer actor(s) for job %s (%s)", trainers, spec.job, "GPU" if use_gpus else "CPU"
        )

    def run(self) -> list[TrainResult]:
        """Train to the end; returns every trainer's result (rank 0's carries the scores)."""
        import ray

        master = ray.get(self.actors[0].rendezvous.remote()) if self.trainers > 1 else None
        ray.get([actor.prepare.remote(master) for actor in self.actors])
        return ray.get([actor.run.remote() for actor in self.actors])

    def shutdown(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)


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

    Starts a private local Ray when this process has none and ``ray_address``
    is not given, and stops it again at the end; an existing connection is reused
    (:func:`saintpipe.core.ray_cluster.connect_ray`).

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
        ray_address: an existing Ray cluster to join (``auto``, ``host:port``).

    Returns:
        The merged :class:`~saintpipe.trainer.loop.TrainResult`: test score, epochs, subgraphs and the time breakdown.
    """
    import ray

    from saintpipe.core.ray_cluster import connect_ray

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
    started = connect_ray(ray_address)
    group = TrainerGroup(spec, trainers, cpus_per_trainer=cpus_per_trainer)
    try:
        return merge_results(group.run())
    finally:
        group.shutdown()
        if started:
            ray.shutdown()
