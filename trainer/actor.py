"""Trainers as Ray actors: one per trainer, a GPU each when Ray offers one, data-parallel when several.

Callers use :func:`train` (or :class:`TrainerGroup` to hold, follow and restart the actors, as
``saintpipe run`` does); :class:`TrainerActor` is the one actor class.

Example::

    result = train("cora-gcn", "data/cora", "redis://:pw@127.0.0.1:6379/0", "127.0.0.1:50051;127.0.0.1:50052",
                   TrainerConfig(epochs=50), trainers=2)
    print(result.test_score, result.times.data_wait)
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import replace
from typing import Any

import ray

from saintpipe.core.errors import (
    AuthenticationFailed,
    ConfigError,
    DatasetError,
    InvalidArgument,
    SaintpipeError,
    ServiceUnavailable,
)
from saintpipe.services.feature_shard.cache import CacheConfig
from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.assemble import AssembledTrainer, TrainerSpec, assemble_trainer
from saintpipe.trainer.config import TrainerConfig
from saintpipe.trainer.progress import TrainerProgress
from saintpipe.trainer.result import TrainResult
from saintpipe.trainer.timing import TimeBreakdown


log = logging.getLogger(__name__)


class TrainerActor:
    """One rank in a Ray worker process: :meth:`prepare` assembles it, :meth:`run` trains.

    A threaded actor (``max_concurrency`` above 1) also answers :meth:`progress`, :meth:`finish_at` and the
    evaluation questions while :meth:`run` trains: what a console run shows and steers.

    Args:
        spec: the job. rank, world_size: this rank's place in the data-parallel group.
        threads: torch threads when ``[trainer] threads`` is 0 (0: torch's default).
        cache: the feature client's trainer-side cache, or None.
    """

    def __init__(self, spec: TrainerSpec, rank: int, world_size: int, *, threads: int = 0,
                 cache: CacheConfig | None = None) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.spec, self.rank, self.world_size, self.threads, self.cache = spec, rank, world_size, threads, cache
        self.trainer: AssembledTrainer | None = None
        self._lock = threading.Lock()
        self._estimate_made: threading.Event | None = None  # set once the loop made its evaluation estimate

    def rendezvous(self) -> str:
        """Rank 0: a ``host:port`` the others can reach for the data-parallel process group."""
        from saintpipe.trainer.distributed import free_port

        # One node: loopback. Several: the address Ray itself uses to reach this node.
        alive = [n for n in ray.nodes() if n.get("Alive")]
        host = "127.0.0.1" if len(alive) <= 1 else ray.util.get_node_ip_address()
        return f"{host}:{free_port(host)}"

    def prepare(self, master: str | None, metrics_port: int | None = None,
                estimate_evaluation: bool = False) -> str | None:
        """Assemble this rank (dataset, pool, features, group, loop); returns its metrics URL.

        Rank r serves its metrics on ``spec.metrics_port + r`` (ranks may share a host), or on
        ``metrics_port`` when given (a restarted rank keeps the endpoint the run announced).
        ``estimate_evaluation``: then estimate one full-graph evaluation (the loop keeps it for
        :meth:`evaluation_estimate`) right after the first training step, in the loop's thread: not before the
        first step, which it would delay, nor beside the steps, which would share its core.
        """
        spec = self.spec
        port = None
        if spec.metrics_port is not None:
            port = metrics_port or (spec.metrics_port + self.rank if spec.metrics_port else 0)
        if estimate_evaluation:
            self._estimate_made = threading.Event()
        trainer = assemble_trainer(spec, self.rank, self.world_size, master, threads=self.threads,
                                   metrics_port=port, cache=self.cache,
                                   on_first_step=self._estimate_after_first_step if estimate_evaluation else None)
        self.trainer = trainer
        return trainer.metrics_url

    def _estimate_after_first_step(self) -> None:
        """The evaluation estimate, made in the loop's thread between its first and second step."""
        try:
            with self._lock:
                if self.trainer is not None:
                    self.trainer.loop.evaluation_estimate()
        except Exception as exc:  # noqa: BLE001 - training goes on; the run's budget asks again later
            log.warning("the evaluation estimate failed: %s", exc)
        finally:
            if self._estimate_made is not None:
                self._estimate_made.set()

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

    def evaluation_estimate(self, wait_s: float = 120.0) -> tuple[float, bool]:
        """Seconds one full-graph evaluation takes on this rank (measured, else estimated; NaN: not ready), and
        whether the end of training needs one (not when the best validation's pass scored the test split).

        A rank prepared with ``estimate_evaluation`` answers once its loop made the estimate after its first
        step (at most ``wait_s`` later; then it estimates here)."""
        if self._estimate_made is not None:
            self._estimate_made.wait(wait_s)
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
    """``trainers`` Ray actors training one job data-parallel: started, followed, steered and restarted.

    :func:`train` (``saintpipe serve trainer``) runs them to the end with :meth:`run`. A console run
    (``saintpipe run``) also watches training while it happens (:meth:`progress`, the per-epoch bars), ends it
    early (:meth:`finish`, ``[run] max_seconds``), restarts ranks that died (:meth:`failure`, :meth:`restart`)
    and shows where each trainer's metrics are (``metrics_urls``): it makes threaded actors
    (``max_concurrency`` above 1), so that ``progress()`` answers while ``run()`` trains.

    Args:
        spec: the job (see :class:`~saintpipe.trainer.assemble.TrainerSpec`).
        trainers: how many trainers (data-parallel ranks).
        cpus_per_trainer: CPUs Ray reserves for each actor.
        use_gpus: give each actor one GPU (default: when Ray's cluster has one free per trainer).
        threads: torch threads per actor when ``[trainer] threads`` is 0 (0: torch's default).
        cache: the feature client's trainer-side cache, or None.
        max_concurrency: calls each actor answers at once.

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
        threads: int = 0,
        cache: CacheConfig | None = None,
        max_concurrency: int = 1,
    ) -> None:
        if trainers < 1:
            raise InvalidArgument(f"trainers must be >= 1, got {trainers}")
        self.spec, self.trainers, self.threads, self.cache = spec, trainers, threads, cache
        self._options = {"num_cpus": cpus_per_trainer, "max_concurrency": max_concurrency, "max_restarts": 0}
        self._gpus = use_gpus
        # Any: ray's annotations give an actor's methods no `.remote`.
        self.actors: list[Any] = []
        self._runs: list[ray.ObjectRef] = []
        self._preparing: list[ray.ObjectRef] = []  # prepare()'s answers, asked by begin()
        self._results: list[TrainResult] | None = None
        self._last = TrainerProgress()
        self._finish_target: int | None = None  # finish()'s step target, given again to restarted actors
        self._eval_deadline: float | None = None  # cut_evaluation_at()'s, given again to restarted actors
        self._estimate = math.nan  # evaluation_seconds(): the last answer, the question in flight and since when
        self.final_evaluation_needed = True  # with it: whether the end of training needs a full-graph pass
        self._estimate_ref: tuple[ray.ObjectRef | None, float] = (None, -math.inf)
        self._metrics_ports: dict[int, int] = {}  # rank -> port, kept by a restarted rank
        self.metrics_urls: dict[str, str] = {}
        self._launch()

    def _launch(self) -> None:
        """Create the actors (they import torch in the background meanwhile)."""
        gpus = self._gpus
        self.use_gpus = ray.available_resources().get("GPU", 0) >= self.trainers if gpus is None else gpus
        remote = ray.remote(TrainerActor).options(num_gpus=1 if self.use_gpus else 0, **self._options)
        self.actors = [remote.remote(self.spec, rank, self.trainers, threads=self.threads, cache=self.cache)
                       for rank in range(self.trainers)]
        self._preparing = []
        log.info("started %d trainer actor(s) for job %s (%s)", self.trainers, self.spec.job,
                 "GPU" if self.use_gpus else "CPU")

    def begin(self, estimate_evaluation: bool = False) -> None:
        """Have every rank assemble itself (and rank 0 estimate one full-graph evaluation, if asked) in the
        background, without waiting: a caller starts other parts meanwhile, and :meth:`start` collects it."""
        if self._preparing:
            return
        # Rank 0's rendezvous travels as a reference: Ray hands the ranks its value once it is there.
        master = self.actors[0].rendezvous.remote() if self.trainers > 1 else None
        self._preparing = [a.prepare.remote(master, self._metrics_ports.get(rank), estimate_evaluation and rank == 0)
                           for rank, a in enumerate(self.actors)]

    def _prepare(self, timeout: float | None, estimate_evaluation: bool = False) -> list[str | None]:
        """Every rank assembled (and in the data-parallel group); their metrics URLs."""
        self.begin(estimate_evaluation)
        try:
            return ray.get(self._preparing, timeout=timeout)
        finally:
            self._preparing = []

    def run(self) -> list[TrainResult]:
        """Train to the end; returns every trainer's result (rank 0's carries the scores)."""
        self._prepare(None)
        return ray.get([actor.run.remote() for actor in self.actors])

    def start(self, timeout: float = 120.0, estimate_evaluation: bool = False) -> None:
        """Wait until every actor is connected (and in the data-parallel group), then start training.

        ``estimate_evaluation``: rank 0 estimates one full-graph evaluation (a run with a deadline needs it)
        right after its first step (unless :meth:`begin` already asked without it); :meth:`evaluation_seconds`
        has the answer once it is made.

        Raises:
            ServiceUnavailable: an actor failed to start or did not start in time.
        """
        try:
            urls = self._prepare(timeout, estimate_evaluation)
        except ray.exceptions.GetTimeoutError:
            raise ServiceUnavailable(f"the trainers did not start within {timeout:g} s") from None
        except ray.exceptions.RayError as exc:
            raise ServiceUnavailable(f"a trainer failed to start: {_last_line(exc)}") from None
        for rank, url in enumerate(urls):
            if url:
                self.metrics_urls[f"trainer {rank}"] = url
                self._metrics_ports[rank] = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        if self._finish_target is not None:
            ray.get([a.finish_at.remote(self._finish_target) for a in self.actors], timeout=10.0)
        if self._eval_deadline is not None:
            self.cut_evaluation_at(self._eval_deadline)
        self._runs = [a.run.remote() for a in self.actors]
        if estimate_evaluation:  # answered after rank 0's first step; evaluation_seconds() collects it
            self._estimate_ref = (self.actors[0].evaluation_estimate.remote(), time.monotonic())

    def restart(self, timeout: float = 120.0) -> None:
        """Replace every rank by a fresh actor that resumes from the latest checkpoint.

        All ranks go: data-parallel ranks average gradients every step, so the survivors of a dead rank
        would wait for it forever; they restart together from the same checkpoint instead. Their
        unacknowledged subgraphs come back to them through the pool (``SubgraphPool.recover``).
        """
        self.shutdown()
        self._runs, self._results = [], None
        self._launch()
        self.start(timeout=timeout)

    def progress(self) -> TrainerProgress:
        """Rank 0's progress (the last known one if it cannot answer right now), ``done`` once all ended.

        A rank that failed is not done: it is restarted, or the run fails (the supervisor decides).
        """
        if not self.actors:
            return self._last
        try:
            p = ray.get(self.actors[0].progress.remote(), timeout=5.0)
        except (ray.exceptions.RayError, TimeoutError):
            return self._last
        done = bool(self._runs) and len(self._ended()) == len(self._runs) and self.failure() is None
        self._last = replace(p, done=done)
        return self._last

    def _ended(self) -> list[ray.ObjectRef]:
        """The ranks' runs that have ended (finished or failed), without waiting."""
        if not self._runs:
            return []
        return ray.wait(self._runs, num_returns=len(self._runs), timeout=0)[0]

    def failure(self) -> tuple[str, bool] | None:
        """Why a trainer failed and whether starting it again can help, or None (a finished run is not a
        failure)."""
        ended = self._ended()
        for rank, ref in enumerate(self._runs):
            if ref in ended:
                try:
                    ray.get(ref, timeout=0)
                except ray.exceptions.RayError as exc:
                    return f"trainer {rank} failed: {_last_line(exc)}", _restartable(exc)
        return None

    def finish(self) -> None:
        """End training a step or two from now on every rank (they still score the best weights); a validation
        running now is cut, so that the final scoring starts at once."""
        steps = [ray.get(a.progress.remote(), timeout=10.0).steps for a in self.actors]
        target = max(steps) + (2 if self.trainers > 1 else 1)  # ranks differ by at most one step (lockstep)
        self._finish_target = target
        ray.get([a.finish_at.remote(target) for a in self.actors], timeout=10.0)
        ray.get([a.cancel_validation.remote() for a in self.actors], timeout=10.0)

    def evaluation_seconds(self, every_s: float = 5.0) -> float:
        """Rank 0's latest figure for one full-graph evaluation, in seconds (NaN until the first arrives).

        Never waits: the question goes to the actor in the background and is asked again ``every_s`` after
        each answer (the first answer times a few blocks of each layer; later ones are the last evaluation's
        measured time). ``final_evaluation_needed`` comes with each answer."""
        ref, at = self._estimate_ref
        if ref is not None and ray.wait([ref], timeout=0)[0]:
            try:
                self._estimate, self.final_evaluation_needed = ray.get(ref, timeout=0)
            except ray.exceptions.RayError as exc:  # a restarted rank: ask the new one
                log.debug("evaluation estimate unavailable: %s", exc)
            ref, at = None, time.monotonic()
            self._estimate_ref = (ref, at)
        if ref is None and self.actors and time.monotonic() - at >= every_s:
            self._estimate_ref = self.actors[0].evaluation_estimate.remote(), time.monotonic()
        return self._estimate

    def cut_evaluation_at(self, deadline: float | None) -> None:
        """Every rank cuts any evaluation still running at ``deadline`` (``time.time()``), restarted ones too."""
        self._eval_deadline = deadline
        ray.get([a.cut_evaluation_at.remote(deadline) for a in self.actors], timeout=10.0)

    def snapshot(self) -> TrainResult | None:
        """The merged TrainResult so far, asked of the running ranks (None if they cannot answer): what an
        interrupted run reports, its evaluation "not run"."""
        if not self.actors:
            return None
        try:
            parts = ray.get([a.snapshot.remote() for a in self.actors], timeout=10.0)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            log.debug("trainer snapshot unavailable: %s", exc)
            return None
        return merge_results(parts, check=False) if parts and all(parts) else None

    def wait(self) -> list[TrainResult]:
        """Every rank's TrainResult, once all have ended.

        Raises:
            ServiceUnavailable: a trainer failed (the message is its error's last line).
        """
        if self._results is None:
            try:
                self._results = ray.get(self._runs)
            except ray.exceptions.RayError as exc:
                raise ServiceUnavailable(f"a trainer failed: {_last_line(exc)}") from None
        return self._results

    def result(self) -> TrainResult | None:
        """The merged TrainResult (rank 0's scores, times summed over ranks) once training ended, else None.

        Raises:
            SaintpipeError: the ranks ended with different weights (the gradient averaging broke).
        """
        if self._results is None and self._runs and len(self._ended()) == len(self._runs):
            try:
                self._results = ray.get(self._runs, timeout=0)
            except ray.exceptions.RayError:
                return None
        if not self._results:
            return None
        try:
            return merge_results(self._results)
        except RuntimeError as exc:
            raise SaintpipeError(str(exc)) from None

    def shutdown(self) -> None:
        """Kill every actor."""
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except ray.exceptions.RayError:
                pass
        self.actors = []


def _last_line(exc: BaseException) -> str:
    """The informative line of a Ray error (its last), not the whole remote traceback."""
    if isinstance(exc, ray.exceptions.ActorDiedError):
        return "its actor process died"
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


def _restartable(exc: BaseException) -> bool:
    """Whether starting the trainer again can cure ``exc``: not bad input (config, dataset, arguments, password)."""
    cause = getattr(exc, "cause", None)
    return not isinstance(cause, (ConfigError, DatasetError, InvalidArgument, AuthenticationFailed))


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

    Starts a private local Ray when this process has none and ``ray_address`` is not given, and stops it again
    at the end; an existing connection is reused (:func:`saintpipe.core.ray_cluster.connect_ray`).

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
        The merged :class:`~saintpipe.trainer.result.TrainResult`: test score, epochs, subgraphs and the time breakdown.
    """
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
