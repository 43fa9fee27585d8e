"""The run's trainers: the trainer package's actors, followed, steered and restarted by the runner.

``saintpipe.trainer.actor.train`` trains to the end and then returns; a console run
also needs to see training while it happens (the per-epoch bars), to end it
early (``[run] max_seconds``), to restart ranks that died and to know where each
trainer's metrics are. :class:`LocalTrainers` holds the run's
:class:`~saintpipe.trainer.actor.TrainerActor` s (assembled by
:func:`saintpipe.trainer.assemble.assemble_trainer`, as every trainer is) as threaded
actors, so that ``progress()`` answers while ``run()`` trains. Each has one torch
thread (Ray gives it one CPU) and the feature client's trainer-side cache (static
highest-degree rows plus LRU), whose hit rate the dashboard shows.
"""

from __future__ import annotations

import dataclasses
import logging
import math
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
from saintpipe.trainer.progress import TrainerProgress
from saintpipe.pipeline.supervision import Failure

log = logging.getLogger(__name__)


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
        spec: the job (:class:`saintpipe.trainer.assemble.TrainerSpec`).
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
        from saintpipe.trainer.actor import TrainerActor

        use_gpus = ray.available_resources().get("GPU", 0) >= self.trainers
        remote = ray.remote(TrainerActor).options(num_cpus=1, num_gpus=1 if use_gpus else 0, max_concurrency=4,
                                                  max_restarts=0)
        # One torch thread each unless [trainer] threads says otherwise: Ray gives the actor one CPU.
        self._actors = [remote.remote(self.spec, rank, self.trainers, threads=1, cache=self.cache)
                        for rank in range(self.trainers)]

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
