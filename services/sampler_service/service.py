"""The supervisor: starts the sampler workers, keeps them running, serves their metrics.

Section 4.3 of the GraphSAINT parallel-training paper: subgraphs are
independent, so p_inter samplers run side by side with no data dependency,
one per core. Here each is a Ray actor (see :mod:`worker`); this class starts
them, computes the normalization once with all of them, restarts the ones
that die, adds and removes workers on request and stops them all on
:meth:`stop`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from saintpipe.errors import InvalidArgument, ServiceUnavailable
from services.pool.connection import redact_url
from services.sampler_service.config import SamplerServiceConfig
from services.sampler_service.counters import WorkerCounters
from services.sampler_service.metrics import MetricsServer, MetricsSnapshot
from services.sampler_service.worker import SamplerWorker, WorkerInfo, WorkerSpec

log = logging.getLogger(__name__)


@dataclass
class _Slot:
    """The supervisor's record of one worker index."""

    index: int
    worker: SamplerWorker
    run_ref: Any = None
    pid: int | None = None
    retired: WorkerCounters = field(default_factory=WorkerCounters)  # counts of earlier incarnations
    current: WorkerCounters = field(default_factory=WorkerCounters)
    restarts: int = 0
    failures_on_actor: int = 0  # crashes of this actor handle, against Ray's max_restarts

    @property
    def total(self) -> WorkerCounters:
        return self.retired.add(self.current)


@dataclass(frozen=True)
class WorkerStats:
    worker: int
    pid: int | None
    restarts: int
    counters: WorkerCounters


@dataclass(frozen=True)
class ServiceStats:
    """A point-in-time view of the service."""

    workers: list[WorkerStats]
    removed: dict[int, WorkerCounters]
    pool: dict[str, float] | None

    @property
    def subgraphs(self) -> int:
        return sum(w.counters.subgraphs for w in self.workers) + sum(c.subgraphs for c in self.removed.values())

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self.workers)


class SamplerService:
    """Supervise a job's sampler workers.

    Args:
        config: the service configuration.

    Example:
        >>> service = SamplerService(SamplerServiceConfig(data="data/demo", pool={"url": url})))  # doctest: +SKIP
        >>> service.start(4)            # normalization, then 4 producing workers
        >>> service.add_workers(2); service.remove_workers(1)
        >>> service.stats().subgraphs
        >>> service.stop()
    """

    def __init__(self, config: SamplerServiceConfig) -> None:
        self.config = config
        self._lock = threading.RLock()
        self._slots: dict[int, _Slot] = {}
        self._removed: dict[int, WorkerCounters] = {}
        self._removed_restarts: dict[int, int] = {}
        self._pool_stats: dict[str, float] | None = None
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._metrics: MetricsServer | None = None
        self._redis_server = None
        self._owns_ray = False
        self._pool = None
        self._spec: WorkerSpec | None = None
        self.redis_url: str | None = config.pool.url
        self.normalization_reused: bool | None = None
        self._norm_ref = None

    # --- life cycle ----------------------------------------------------------
    def start(self, workers: int | None = None) -> None:
        """Connect (or start) Ray and Redis, estimate the normalization, start ``workers`` producers.

        Raises:
            ServiceUnavailable: Ray or Redis cannot be reached.
            DatasetError: the dataset directory is missing or malformed.
        """
        n = self.config.workers if workers is None else workers
        if n < 1:
            raise InvalidArgument(f"workers must be >= 1, got {n}")
        from services.dataset.store import open_dataset

        dataset = open_dataset(self.config.data)  # fail here, with the path, not inside N actors
        self._connect_ray()
        self._connect_redis()
        pool_config = self.config.pool.model_copy(update={"url": self.redis_url})
        self._spec = WorkerSpec(
            data=str(Path(self.config.data).resolve()), job_seed=self.config.seed,
            sampler=self.config.sampler.model_dump(mode="json"), pool=pool_config.model_dump(mode="json"),
            push_poll_s=self.config.push_poll_s,
        )
        with self._lock:
            for index in range(n):
                self._slots[index] = _Slot(index, self._new_worker(index))
        self._check_cores(n)
        self._ensure_normalization(dataset)
        with self._lock:
            for slot in self._slots.values():
                slot.run_ref = slot.worker.run_async(self._norm_ref)
        if self.config.metrics_port is not None:
            self._metrics = MetricsServer(self._snapshot, self.config.metrics_host, self.config.metrics_port)
            log.info("sampler metrics on %s", self._metrics.url)
        self._monitor = threading.Thread(target=self._monitor_loop, name="sampler-supervisor", daemon=True)
        self._monitor.start()
        log.info("sampler service: %d workers filling pool %r at %s", n, self.config.job, redact_url(self.redis_url))

    def stop(self) -> None:
        """Stop every worker (each finishes its current push), then release what :meth:`start` acquired."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join(timeout=self.config.health_interval_s * 4 + 5)
        with self._lock:
            slots = list(self._slots.values())
        self._stop_slots(slots)
        if self._metrics is not None:
            self._metrics.close()
        if self._pool is not None:
            self._pool.close()
        if self._redis_server is not None:
            self._redis_server.stop()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        log.info("sampler service stopped")

    def __enter__(self) -> "SamplerService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- scaling ------------------------------------------------------------
    def add_workers(self, k: int) -> list[int]:
        """Start ``k`` more workers on the lowest free indices (an index reused continues its sequence)."""
        if k < 1:
            raise InvalidArgument(f"add_workers: k must be >= 1, got {k}")
        added = []
        with self._lock:
            for _ in range(k):
                index = next(i for i in range(len(self._slots) + k + 1) if i not in self._slots)
                slot = _Slot(index, self._new_worker(index))
                if index in self._removed:  # counters are per index: keep what it counted before
                    slot.retired = self._removed.pop(index)
                    slot.restarts = self._removed_restarts.pop(index, 0)
                slot.run_ref = slot.worker.run_async(self._norm_ref)
                self._slots[index] = slot
                added.append(index)
            total = len(self._slots)
        self._check_cores(total)
        log.info("sampler service: added workers %s (%d running)", added, total)
        return added

    def remove_workers(self, k: int) -> list[int]:
        """Stop the ``k`` highest-indexed workers; their counts stay in the metrics."""
        with self._lock:
            if not 1 <= k <= len(self._slots):
                raise InvalidArgument(f"remove_workers: k must be in [1, {len(self._slots)}], got {k}")
            indices = sorted(self._slots)[-k:]
            slots = [self._slots.pop(i) for i in indices]
        self._stop_slots(slots)
        with self._lock:
            for slot in slots:
                self._removed[slot.index] = slot.total
                self._removed_restarts[slot.index] = slot.restarts
        log.info("sampler service: removed workers %s", indices)
        return indices

    # --- views --------------------------------------------------------------
    def stats(self) -> ServiceStats:
        """Per-worker totals (this incarnation and earlier ones), restarts and the pool's stats."""
        self._poll()
        with self._lock:
            workers = [WorkerStats(s.index, s.pid, s.restarts, s.total) for _, s in sorted(self._slots.items())]
            return ServiceStats(workers, dict(self._removed), self._pool_stats)

    def worker_info(self, timeout: float = 60.0) -> list[WorkerInfo]:
        """Where each running worker is (pid, core, host)."""
        with self._lock:
            workers = [s.worker for _, s in sorted(self._slots.items())]
        return [w.info(timeout=timeout) for w in workers]

    @property
    def metrics_url(self) -> str | None:
        return self._metrics.url if self._metrics is not None else None

    # --- internals ------------------------------------------------------------
    def _new_worker(self, index: int) -> SamplerWorker:
        return SamplerWorker(index, self._spec, num_cpus=self.config.num_cpus_per_worker,
                             max_restarts=self.config.max_restarts)

    def _connect_ray(self) -> None:
        if ray.is_initialized():
            return
        address = self.config.ray_address
        try:
            if address in (None, "local"):
                # address="local": always a new private cluster, never one some other driver left running.
                # More logical CPUs than cores when asked for more workers: they then share cores.
                cpus = max(len(os.sched_getaffinity(0)), int(self.config.workers * self.config.num_cpus_per_worker))
                ray.init(address="local", num_cpus=cpus, include_dashboard=False)
            else:
                ray.init(address=address, include_dashboard=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ServiceUnavailable(f"ray: cannot start or join {address or 'a local cluster'}: {exc}") from exc
        self._owns_ray = True

    def _connect_redis(self) -> None:
        from services.pool.pool import SubgraphPool
        from services.pool.redis_server import RedisServer

        if self.redis_url is None:
            # SAINTPIPE_REDIS_URL when set, else a private redis-server stopped in stop().
            self._redis_server = RedisServer().start()
            self.redis_url = self._redis_server.url
        self._pool = SubgraphPool.from_config(self.config.pool, url=self.redis_url)

    def _check_cores(self, n: int) -> None:
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if n > cpus:
            log.warning("sampler service: %d workers but the Ray cluster has %d CPUs; workers will share cores",
                        n, cpus)

    def _ensure_normalization(self, dataset) -> None:
        from services.sampler_service.normalization import ensure_normalization

        with self._lock:
            workers = [s.worker for _, s in sorted(self._slots.items())]
        norm, self.normalization_reused = ensure_normalization(
            dataset, self.config.sampler, workers, self.config.norm_subgraphs, self.config.norm_seed)
        # One copy in the object store per node, read zero-copy by every worker (also on other hosts,
        # which may not see this host's dataset directory).
        self._norm_ref = ray.put(norm) if norm is not None else None

    def _stop_slots(self, slots: list[_Slot]) -> None:
        for slot in slots:
            try:
                slot.worker.stop_async()
            except ray.exceptions.RayError:
                pass
        refs = [s.run_ref for s in slots if s.run_ref is not None]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=self.config.stop_timeout_s)
        self._poll(slots)
        for slot in slots:
            slot.worker.kill()

    def _monitor_loop(self) -> None:
        while not self._stopping.wait(self.config.health_interval_s):
            try:
                self._check_runs()
                self._poll()
            except Exception:  # the supervisor must outlive any one bad poll
                log.exception("sampler supervisor: check failed")

    def _check_runs(self) -> None:
        """Restart production on every worker whose run() ended while the service runs."""
        with self._lock:
            running = {s.run_ref: s for s in self._slots.values() if s.run_ref is not None}
        if not running:
            return
        done, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
        for ref in done:
            if self._stopping.is_set():
                return
            slot = running[ref]
            with self._lock:
                if self._slots.get(slot.index) is not slot:
                    continue  # removed meanwhile
            self._restart(slot, ref)

    def _restart(self, slot: _Slot, ref: Any) -> None:
        try:
            ray.get(ref)
            reason = "run() returned without being stopped"
        except ray.exceptions.RayTaskError as exc:
            reason = f"run() raised: {exc}"
            time.sleep(min(2.0 ** slot.restarts, 30.0) * 0.1)  # a failing dependency: do not spin
        except ray.exceptions.RayError as exc:
            reason = f"its process died ({type(exc).__name__})"
            slot.failures_on_actor += 1
        with self._lock:
            slot.restarts += 1
            if slot.failures_on_actor > self.config.max_restarts:
                # Ray has given up on this actor: replace it; the new one continues the sequence from Redis.
                slot.worker.kill()
                slot.worker = self._new_worker(slot.index)
                slot.failures_on_actor = 0
            slot.run_ref = slot.worker.run_async(self._norm_ref)
        log.warning("sampler worker %d restarted (restart %d): %s", slot.index, slot.restarts, reason)

    def _poll(self, slots: list[_Slot] | None = None) -> None:
        """Fetch every worker's counters and the pool's stats."""
        with self._lock:
            slots = list(self._slots.values()) if slots is None else slots
        refs = [(s, s.worker.counters_async()) for s in slots]
        for slot, ref in refs:
            try:
                data = ray.get(ref, timeout=5.0)
            except (ray.exceptions.RayError, TimeoutError):
                continue  # restarting; the next poll catches up
            with self._lock:
                pid, counters = data
                if slot.pid is not None and pid != slot.pid:
                    slot.retired = slot.retired.add(slot.current)  # a new incarnation counts from zero
                slot.pid, slot.current = pid, counters
        if self._pool is not None:
            try:
                self._pool_stats = dataclasses.asdict(self._pool.stats())
            except ServiceUnavailable as exc:
                log.warning("sampler supervisor: cannot read the pool's stats: %s", exc)

    def _snapshot(self) -> MetricsSnapshot:
        with self._lock:
            workers = {i: c for i, c in self._removed.items()}
            restarts = dict(self._removed_restarts)
            for slot in self._slots.values():
                workers[slot.index] = slot.total
                restarts[slot.index] = slot.restarts
            return MetricsSnapshot(workers, restarts, self.config.job, self._pool_stats)
