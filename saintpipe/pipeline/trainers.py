"""The run's trainers: the trainer package's training loop in Ray actors the runner can follow.

``saintpipe.trainer.actor.train`` trains to the end and then returns; a console run
also needs to see training while it happens (the per-epoch bars), to end it
early (``[run] max_seconds``) and to know where each trainer's metrics are. So
each actor here wires the trainer package's own parts exactly as
:func:`saintpipe.trainer.worker.run_trainer` does (:class:`~saintpipe.trainer.loop.TrainLoop` on a
prefetching :class:`~saintpipe.trainer.feeds.PoolFeed`, data-parallel through
:class:`~saintpipe.trainer.distributed.DataParallel`), keeps the loop, and answers
``progress()`` while ``run()`` trains (a threaded actor). One difference: the
feature client has the trainer-side cache (static highest-degree rows plus
LRU), whose hit rate the dashboard shows; the training steps' gathers go through a
:class:`~saintpipe.trainer.metrics.FeatureMeter`, so the run reports their hit rate
and bytes fetched per step apart from evaluation's.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
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
from saintpipe.pipeline.progress import TrainerProgress
from saintpipe.pipeline.supervision import Failure

log = logging.getLogger(__name__)


def _observed_metrics(name: str):
    """The trainer's metrics, remembering the last loss and validation score for ``progress()``."""
    from saintpipe.trainer.metrics import TrainerMetrics

    class ObservedMetrics(TrainerMetrics):
        last_loss = math.nan
        last_val = math.nan

        def observe_step(self, compute_s: float, data_wait_s: float, fetch_s: float, loss: float) -> None:
            super().observe_step(compute_s, data_wait_s, fetch_s, loss)
            self.last_loss = loss

        def val_score(self, score: float) -> None:
            super().val_score(score)
            self.last_val = score

    return ObservedMetrics(name)


class _TrainerActor:
    """One rank: builds the trainer package's loop in :meth:`prepare`, trains in :meth:`run`."""

    def __init__(self, spec, rank: int, world_size: int, cache: dict[str, int] | None) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.spec, self.rank, self.world_size, self.cache = spec, rank, world_size, cache
        self.loop = self.feed = self.group = self.pool = self.client = self.http = None
        self.metrics = None
        self._lock = threading.Lock()

    def rendezvous(self) -> str:
        """Rank 0: a ``host:port`` the others can reach for the data-parallel process group."""
        from saintpipe.trainer.distributed import free_port

        # One node: loopback. Several: the address Ray itself uses to reach this node (as saintpipe.trainer.actor does).
        alive = [n for n in ray.nodes() if n.get("Alive")]
        host = "127.0.0.1" if len(alive) <= 1 else ray.util.get_node_ip_address()
        return f"{host}:{free_port(host)}"

    def prepare(self, master: str | None, metrics_port: int | None = None) -> str | None:
        """Open the dataset, connect to the pool and the shards, join the group; returns the metrics URL.

        ``metrics_port``: serve the metrics there (a restarted rank keeps the endpoint the run announced).
        """
        import torch

        from saintpipe.services.dataset.expand import SubgraphExpander
        from saintpipe.services.dataset.sample_graph import sampled_degrees
        from saintpipe.services.dataset.store import open_dataset
        from saintpipe.services.feature_shard.cache import CacheConfig
        from saintpipe.services.feature_shard.client import FeatureClient
        from saintpipe.services.pool.pool import SubgraphPool
        from saintpipe.trainer.checkpoint import Checkpointer
        from saintpipe.trainer.distributed import DataParallel
        from saintpipe.trainer.evaluate import EvalGraph
        from saintpipe.trainer.feeds import PoolFeed
        from saintpipe.trainer.loop import TrainLoop
        from saintpipe.trainer.metrics import FeatureMeter, serve_metrics
        from saintpipe.trainer.run_files import outputs_for
        from saintpipe.trainer.step import TrainState
        from saintpipe.trainer.worker import pick_device, take_back, trainer_name

        spec, cfg = self.spec, self.spec.config
        name = trainer_name(spec.job, self.rank)
        torch.set_num_threads(cfg.threads or 1)  # one core per trainer actor unless configured
        device = pick_device(cfg.device)
        self.metrics = _observed_metrics(name)
        url = None
        if spec.metrics_port is not None:
            port = metrics_port or (spec.metrics_port + self.rank if spec.metrics_port else 0)
            self.http = serve_metrics(port, spec.metrics_host)
            url = f"http://{spec.metrics_host}:{self.http.server_address[1]}/metrics"
        dataset = open_dataset(spec.dataset_dir)
        degrees = dataset.degrees()
        cache = CacheConfig.model_validate(self.cache) if self.cache else None
        self.client = FeatureClient(spec.feature_addresses, name=name, cache=cache,
                                    degrees=degrees if cache and cache.static_rows else None,
                                    shared_memory=cfg.feature_shared_memory,
                                    retry_deadline_s=cfg.feature_retry_deadline_s,
                                    security=cfg.feature_security())
        self.pool = SubgraphPool.from_config(spec.pool.model_copy(update={"job_id": spec.job}), url=spec.pool_url)
        # The training steps' gathers are counted apart from evaluation's (hit rate, bytes per step).
        meter = FeatureMeter(self.client, self.metrics)
        graph = EvalGraph(indptr=dataset.indptr, indices=dataset.indices, labels=dataset.labels,
                          gather=meter.gather_uncounted, feature_dim=dataset.manifest.feature_dim,
                          splits=dict(dataset.splits))
        state = TrainState(cfg.model, graph.feature_dim, graph.num_classes, graph.multilabel, device=device,
                           seed=cfg.seed)
        if self.world_size > 1:
            self.group = DataParallel(self.rank, self.world_size, master, device,
                                      timeout_s=max(300.0, 4 * cfg.pool_timeout_s))
        checkpointer = Checkpointer(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        self.loop = TrainLoop(state, graph, cfg, name=name, metrics=self.metrics,
                              sync=self.group.sync if self.group else None,
                              decide=self.group.decide if self.group else None,
                              is_leader=self.rank == 0, checkpointer=checkpointer, feature_meter=meter,
                              sampled_degrees=sampled_degrees(dataset, cfg.sample_graph),
                              outputs=outputs_for(spec.output_dir, dataset))
        if self.group is not None:
            self.group.check_same_start(state.steps)
        take_back(self.pool, name)
        self.feed = PoolFeed(self.pool, name, meter.gather, prefetch=cfg.prefetch,
                             expand=SubgraphExpander(dataset))
        return url

    def run(self):
        """Train to the end (epochs, max_steps, early stopping); returns the loop's TrainResult."""
        try:
            return self.loop.run(self.feed)
        finally:
            self.feed.close()
            if self.group is not None:
                self.group.close()
            self.pool.close()
            self.client.close()
            if self.http is not None:
                self.http.shutdown()
                self.http.server_close()

    def progress(self) -> TrainerProgress:
        loop = self.loop
        if loop is None:
            return TrainerProgress()
        p, e = loop.progress, loop.watch.status
        return TrainerProgress(epoch=p.epoch, epoch_fraction=p.epoch_fraction, steps=loop.state.steps,
                               subgraphs=p.subgraphs, loss=self.metrics.last_loss, val_score=self.metrics.last_val,
                               evaluating=e.running, evaluation=e.phase, evaluation_fraction=e.fraction,
                               evaluation_s=e.elapsed_s)

    def finish_at(self, steps: int) -> None:
        """End training once ``steps`` optimizer steps are done (every rank gets the same target)."""
        if self.loop is not None:
            self.loop.config.max_steps = max(1, steps)

    def evaluation_estimate(self) -> tuple[float, bool]:
        """Seconds one full-graph evaluation takes on this rank (measured, else estimated; NaN: not ready), and
        whether the end of training needs one (not when the best validation's pass scored the test split)."""
        with self._lock:  # one estimate at a time; the loop caches it
            if self.loop is None:
                return math.nan, True
            return self.loop.evaluation_estimate(), self.loop.needs_final_evaluation

    def cancel_validation(self) -> None:
        """Cut a validation running now (the run's end is near: its final scoring goes first)."""
        if self.loop is not None:
            self.loop.watch.cancel()

    def cut_evaluation_at(self, deadline: float | None) -> None:
        """Cut any evaluation still running at ``deadline`` (``time.time()``)."""
        if self.loop is not None:
            self.loop.watch.cut_at(deadline)

    def snapshot(self):
        """The TrainResult so far, without scoring (for a run that ends before this rank's loop returns)."""
        return self.loop.snapshot() if self.loop is not None else None


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


class LocalTrainers:
    """Start the run's trainer actors, follow them, stop them.

    Args:
        spec: the job (:class:`saintpipe.trainer.worker.TrainerSpec`).
        trainers: data-parallel ranks.
        cache: the feature client's cache sizes (``CacheConfig`` fields), or None.
    """

    def __init__(self, spec, trainers: int = 1, cache: dict[str, int] | None = None) -> None:
        self.spec, self.trainers, self.cache = spec, trainers, cache
        self._actors: list[Any] = []
        self._runs: list[ray.ObjectRef] = []
        self._results: list | None = None
        self._last = TrainerProgress()
        self._finish_target: int | None = None  # finish()'s step target, given again to restarted actors
        self._eval_deadline: float | None = None  # cut_evaluation_at()'s, given again to restarted actors
        self._estimate = math.nan  # evaluation_seconds(): the last answer, the question in flight and since when
        self.final_evaluation_needed = True  # with it: whether the end of training needs a full-graph pass
        self._estimate_ref: tuple[ray.ObjectRef | None, float] = (None, -math.inf)
        self._metrics_ports: dict[int, int] = {}  # rank -> port, kept by a restarted rank
        self.metrics_urls: dict[str, str] = {}

    def launch(self) -> None:
        """Create the actors (they import torch in the background meanwhile)."""
        use_gpus = ray.available_resources().get("GPU", 0) >= self.trainers
        remote = ray.remote(_TrainerActor).options(num_cpus=1, num_gpus=1 if use_gpus else 0, max_concurrency=4,
                                                   max_restarts=0)
        self._actors = [remote.remote(self.spec, rank, self.trainers, self.cache) for rank in range(self.trainers)]

    def start(self, timeout: float = 120.0, estimate_evaluation: bool = False) -> None:
        """Wait until every actor is connected (and in the data-parallel group), then start training.

        ``estimate_evaluation``: rank 0 first estimates one full-graph evaluation (a run with a deadline
        needs it), before its training steps compete with the estimate for its core.

        Raises:
            ServiceUnavailable: an actor failed to start or did not start in time.
        """
        if not self._actors:
            self.launch()
        try:
            master = ray.get(self._actors[0].rendezvous.remote(), timeout=timeout) if self.trainers > 1 else None
            urls = ray.get([a.prepare.remote(master, self._metrics_ports.get(rank))
                            for rank, a in enumerate(self._actors)], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise ServiceUnavailable(f"the trainers did not start within {timeout:g} s") from None
        except ray.exceptions.RayError as exc:
            raise ServiceUnavailable(f"a trainer failed to start: {_last_line(exc)}") from None
        for rank, url in enumerate(urls):
            if url:
                self.metrics_urls[f"trainer {rank}"] = url
                self._metrics_ports[rank] = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        if self._finish_target is not None:
            ray.get([a.finish_at.remote(self._finish_target) for a in self._actors], timeout=10.0)
        if self._eval_deadline is not None:
            ray.get([a.cut_evaluation_at.remote(self._eval_deadline) for a in self._actors], timeout=10.0)
        if estimate_evaluation:
            try:
                self._estimate, self.final_evaluation_needed = ray.get(self._actors[0].evaluation_estimate.remote(),
                                                                       timeout=timeout)
            except (ray.exceptions.RayError, TimeoutError) as exc:  # asked again while training runs
                log.warning("the evaluation estimate failed before training: %s", exc)
            self._estimate_ref = (None, time.monotonic())
        self._runs = [a.run.remote() for a in self._actors]

    def restart(self, timeout: float = 120.0) -> None:
        """Replace every rank by a fresh actor that resumes from the latest checkpoint.

        All ranks go: data-parallel ranks average gradients every step, so the survivors of a dead rank
        would wait for it forever; they restart together from the same checkpoint instead. Their
        unacknowledged subgraphs come back to them through the pool (``SubgraphPool.recover``).
        """
        self.stop()
        self._runs, self._results = [], None
        self.launch()
        self.start(timeout=timeout)

    def progress(self) -> TrainerProgress:
        """Rank 0's progress (the last known one if it cannot answer right now), ``done`` once all ended.

        A rank that failed is not done: it is restarted, or the run fails (the supervisor decides).
        """
        if not self._actors:
            return self._last
        try:
            p = ray.get(self._actors[0].progress.remote(), timeout=5.0)
        except (ray.exceptions.RayError, TimeoutError):
            return self._last
        ended = self._ended()
        done = bool(self._runs) and len(ended) == len(self._runs) and self._failure(ended) is None
        self._last = dataclasses.replace(p, done=done)
        return self._last

    def _ended(self) -> list[ray.ObjectRef]:
        """The ranks' runs that have ended (finished or failed), without waiting."""
        if not self._runs:
            return []
        return ray.wait(self._runs, num_returns=len(self._runs), timeout=0)[0]

    def failure(self) -> Failure | None:
        """Why a trainer failed, or None (a finished run is not a failure)."""
        return self._failure(self._ended())

    def _failure(self, ended: list[ray.ObjectRef]) -> Failure | None:
        for rank, ref in enumerate(self._runs):
            if ref in ended:
                try:
                    ray.get(ref, timeout=0)
                except ray.exceptions.RayError as exc:
                    return Failure(f"trainer {rank} failed: {_last_line(exc)}", _restartable(exc))
        return None

    def finish(self) -> None:
        """End training a step or two from now on every rank (they still score the best weights); a validation
        running now is cut, so that the final scoring starts at once."""
        steps = [ray.get(a.progress.remote(), timeout=10.0).steps for a in self._actors]
        target = max(steps) + (2 if self.trainers > 1 else 1)  # ranks differ by at most one step (lockstep)
        self._finish_target = target
        ray.get([a.finish_at.remote(target) for a in self._actors], timeout=10.0)
        ray.get([a.cancel_validation.remote() for a in self._actors], timeout=10.0)

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
        if ref is None and self._actors and time.monotonic() - at >= every_s:
            self._estimate_ref = self._actors[0].evaluation_estimate.remote(), time.monotonic()
        return self._estimate

    def cut_evaluation_at(self, deadline: float | None) -> None:
        """Every rank cuts any evaluation still running at ``deadline`` (``time.time()``), restarted ones too."""
        self._eval_deadline = deadline
        ray.get([a.cut_evaluation_at.remote(deadline) for a in self._actors], timeout=10.0)

    def snapshot(self):
        """The merged TrainResult so far, asked of the running ranks (None if they cannot answer): what an
        interrupted run reports, its evaluation "not run"."""
        from saintpipe.trainer.actor import merge_results

        if not self._actors:
            return None
        try:
            parts = ray.get([a.snapshot.remote() for a in self._actors], timeout=10.0)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            log.debug("trainer snapshot unavailable: %s", exc)
            return None
        return merge_results(parts, check=False) if parts and all(parts) else None

    def wait(self) -> list:
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

    def result(self):
        """The merged TrainResult (rank 0's scores, times summed over ranks) once training ended, else None."""
        from saintpipe.trainer.actor import merge_results

        if self._results is None and self._runs:
            if len(self._ended()) == len(self._runs):
                try:
                    self._results = ray.get(self._runs, timeout=0)
                except ray.exceptions.RayError:
                    return None
        if not self._results:
            return None
        try:
            return merge_results(self._results)
        except RuntimeError as exc:  # the ranks' weights differ: the averaging broke
            raise SaintpipeError(str(exc)) from None

    def stop(self) -> None:
        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except ray.exceptions.RayError:
                pass
        self._actors = []
