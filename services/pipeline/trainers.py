"""The run's trainers: Ray actors that train from the pool and the feature shards.

:class:`LocalTrainers` is what the runner sees: start them, read their
progress while they train (threaded actors answer while ``run`` loops), ask
them to finish early, collect the result, stop them. Each actor serves its
own Prometheus endpoint (the ``saintpipe_trainer_*`` and feature-cache
metrics of docs/metrics.md).

INTERIM: until the trainer package exposes its own training entry point, the
actor here runs a plain loop over the trainer package's model, batch and
evaluation code (single trainer; no data-parallel gradient averaging).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from saintpipe.errors import ServiceUnavailable
from services.pipeline.progress import TrainerProgress

log = logging.getLogger(__name__)


@dataclass
class TrainerTimes:
    feature_fetch: float = 0.0
    compute: float = 0.0
    data_wait: float = 0.0
    evaluation: float = 0.0


@dataclass
class TrainerResult:
    test_score: float
    val_score: float
    epochs: int
    steps: int
    subgraphs: int
    stopped_early: bool
    times: TrainerTimes = field(default_factory=TrainerTimes)


class _TrainerMetrics:
    """The trainer metrics of docs/metrics.md for one trainer."""

    def __init__(self, name: str) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        label = {"trainer": name}
        self.steps = Counter("saintpipe_trainer_steps", "Optimizer steps", ["trainer"]).labels(**label)
        self.step_s = Histogram("saintpipe_trainer_step_seconds", "Compute time of one step", ["trainer"]).labels(
            **label)
        self.wait = Counter("saintpipe_trainer_data_wait_seconds", "Time waiting for data", ["trainer"]).labels(
            **label)
        self.fetch = Counter("saintpipe_trainer_fetch_seconds", "Feature fetch time", ["trainer"]).labels(**label)
        self.loss = Gauge("saintpipe_trainer_loss", "Last training loss", ["trainer"]).labels(**label)
        self.val = Gauge("saintpipe_trainer_val_score", "Last validation score", ["trainer"]).labels(**label)

    def observe_step(self, compute: float, wait: float, fetch: float, loss: float) -> None:
        self.steps.inc()
        self.step_s.observe(compute)
        self.wait.inc(wait)
        self.fetch.inc(fetch)
        self.loss.set(loss)

    def val_score(self, value: float) -> None:
        self.val.set(value)


class _TrainerActor:
    """One trainer: pool -> features -> step -> ack; validation at epoch ends; early stopping."""

    def __init__(self, rank: int, spec: dict[str, Any]) -> None:
        import torch

        from services.dataset.store import open_dataset
        from services.feature_shard.cache import CacheConfig
        from services.feature_shard.client import FeatureClient
        from services.pool.config import PoolConfig
        from services.pool.pool import SubgraphPool
        from trainer.config import TrainerConfig
        from trainer.evaluate import EvalGraph
        from trainer.models import build_model

        self.name = f"trainer-{rank}"
        self.config = TrainerConfig.model_validate(spec["trainer"])
        torch.set_num_threads(self.config.threads or 1)
        torch.manual_seed(self.config.seed)
        dataset = open_dataset(spec["data"])
        self.graph = EvalGraph.from_dataset(dataset)
        self.train_mask = self.graph.train_mask()
        self.num_train = int(self.train_mask.sum())
        m = dataset.manifest
        self.model = build_model(self.config.model, m.feature_dim, m.num_classes, m.multilabel)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.config.model.lr,
                                          weight_decay=self.config.model.weight_decay)
        self.pool = SubgraphPool.from_config(PoolConfig.model_validate(spec["pool"]))
        n = dataset.num_nodes
        cache = CacheConfig(static_rows=n // 10, lru_rows=n // 5)
        self.features = FeatureClient(spec["shards"], cache=cache, name=self.name, degrees=self.graph.degrees)
        self._metrics_url = None
        if spec.get("metrics_host"):
            from prometheus_client import start_http_server

            server, _ = start_http_server(0, addr=spec["metrics_host"])
            self._metrics_url = f"http://{spec['metrics_host']}:{server.server_address[1]}/metrics"
        self.metrics = _TrainerMetrics(self.name)
        self._lock = threading.Lock()
        self._finish = threading.Event()
        self._progress = TrainerProgress()
        self.times = TrainerTimes()

    def metrics_url(self) -> str | None:
        return self._metrics_url

    def progress(self) -> TrainerProgress:
        with self._lock:
            return self._progress

    def finish(self) -> None:
        self._finish.set()

    def _evaluate(self, splits):
        from trainer.evaluate import evaluate

        t0 = time.perf_counter()
        scores = evaluate(self.model, self.graph, splits, max_full_bytes=self.config.eval_full_graph_max_bytes,
                          batch_nodes=self.config.eval_batch_nodes)
        self.times.evaluation += time.perf_counter() - t0
        return scores

    def run(self) -> TrainerResult:
        import copy

        from trainer.batch import batch_from_subgraph

        cfg = self.config
        labels = self.graph.labels
        degrees = self.graph.degrees
        epoch, fraction, steps, loss_value, val = 0, 0.0, 0, math.nan, math.nan
        best, best_state, bad, stopped_early = -math.inf, None, 0, False
        while epoch < cfg.epochs and not self._finish.is_set() and not (cfg.max_steps and steps >= cfg.max_steps):
            t0 = time.perf_counter()
            entry = self.pool.get(self.name, timeout=1.0)
            if entry is None:
                self.times.data_wait += time.perf_counter() - t0
                continue
            t1 = time.perf_counter()
            x = self.features.gather(entry.subgraph.node_ids)
            t2 = time.perf_counter()
            batch = batch_from_subgraph(entry.subgraph, x, labels, self.train_mask, degrees)
            self.model.train()
            self.optimizer.zero_grad()
            loss = self.model.loss(self.model(batch), batch)
            loss.backward()
            self.optimizer.step()
            self.pool.ack(entry.entry_id)
            t3 = time.perf_counter()
            steps += 1
            loss_value = float(loss.detach())
            self.times.data_wait += t2 - t0
            self.times.feature_fetch += t2 - t1
            self.times.compute += t3 - t2
            self.metrics.observe_step(t3 - t2, t2 - t0, t2 - t1, loss_value)
            fraction += batch.num_labelled / max(1, self.num_train)
            while fraction >= 1.0:
                fraction -= 1.0
                epoch += 1
                val = self._evaluate(("val",))["val"]
                self.metrics.val_score(val)
                if val > best:
                    best, bad = val, 0
                    best_state = copy.deepcopy(self.model.state_dict())
                else:
                    bad += 1
                    stopped_early = cfg.patience > 0 and bad >= cfg.patience
            with self._lock:
                self._progress = TrainerProgress(epoch, min(fraction, 0.999), steps, steps, loss_value, val)
            if stopped_early:
                break
        if best_state is not None:
            self.model.load_state_dict(best_state)
        scores = self._evaluate(("val", "test"))
        with self._lock:
            self._progress = TrainerProgress(epoch, fraction, steps, steps, loss_value, val, done=True)
        return TrainerResult(scores["test"], scores["val"], epoch, steps, steps, stopped_early, self.times)

    def close(self) -> None:
        self.features.close()
        self.pool.close()


def _last_line(exc: BaseException) -> str:
    """The informative line of a Ray error (its last), not the whole remote traceback."""
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


class LocalTrainers:
    """Start the run's trainer actor(s) and follow them.

    Args:
        config: the run's config (``[trainer]`` section, ``[run] trainers``).
        dataset: the opened dataset.
        redis_url: the pool's Redis.
        shards: feature-shard addresses, per shard a replica list.
    """

    def __init__(self, config, dataset, redis_url: str, shards: list[list[str]]) -> None:
        if config.run.trainers != 1:
            raise NotImplementedError("the interim trainer bridge runs one trainer")
        self.config = config
        self.spec = {
            "data": str(dataset.path), "trainer": config.trainer.model_dump(mode="json"),
            "pool": config.pool.model_copy(update={"url": redis_url}).model_dump(mode="json"),
            "shards": shards, "metrics_host": config.run.metrics_host if config.run.metrics else None,
        }
        self._actors: list[Any] = []
        self._runs: list[ray.ObjectRef] = []
        self._results: list[TrainerResult] | None = None
        self._last = TrainerProgress()
        self.metrics_urls: dict[str, str] = {}

    def launch(self) -> None:
        """Create the actors (they start up in the background)."""
        actor_cls = ray.remote(_TrainerActor).options(num_cpus=1, max_concurrency=4, max_restarts=0)
        self._actors = [actor_cls.remote(rank, self.spec) for rank in range(self.config.run.trainers)]

    def start(self, timeout: float = 120.0) -> None:
        """Wait until every actor is ready, then start training."""
        if not self._actors:
            self.launch()
        try:
            urls = ray.get([a.metrics_url.remote() for a in self._actors], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise ServiceUnavailable(f"the trainers did not start within {timeout:g} s") from None
        except ray.exceptions.RayError as exc:
            raise ServiceUnavailable(f"a trainer failed to start: {_last_line(exc)}") from None
        for rank, url in enumerate(urls):
            if url:
                self.metrics_urls[f"trainer {rank}"] = url
        self._runs = [a.run.remote() for a in self._actors]

    def progress(self) -> TrainerProgress:
        """The leader's progress (the last known one if it cannot answer right now)."""
        if self._actors:
            try:
                self._last = ray.get(self._actors[0].progress.remote(), timeout=5.0)
            except (ray.exceptions.RayError, TimeoutError):
                pass
        return self._last

    def failure(self) -> str | None:
        """Why a trainer failed, or None (a finished run is not a failure)."""
        if not self._runs:
            return None
        done, _ = ray.wait(self._runs, num_returns=len(self._runs), timeout=0)
        for rank, ref in enumerate(self._runs):
            if ref in done:
                try:
                    ray.get(ref, timeout=0)
                except ray.exceptions.RayError as exc:
                    return f"trainer {rank} failed: {_last_line(exc)}"
        return None

    def finish(self) -> None:
        """Ask the trainers to end training now (they still score the best weights)."""
        for actor in self._actors:
            actor.finish.remote()

    def wait(self) -> list[TrainerResult]:
        if self._results is None:
            self._results = ray.get(self._runs)
        return self._results

    def result(self) -> TrainerResult | None:
        """The leader's result once training has ended, else None."""
        if self._results is None and self._runs:
            done, _ = ray.wait(self._runs, num_returns=len(self._runs), timeout=0)
            if len(done) == len(self._runs):
                try:
                    self._results = ray.get(self._runs, timeout=0)
                except ray.exceptions.RayError:
                    return None
        return self._results[0] if self._results else None

    def stop(self) -> None:
        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except ray.exceptions.RayError:
                pass
        self._actors = []


