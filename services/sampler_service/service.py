"""The supervisor: starts the sampler workers, keeps them running, serves their metrics.

Section 4.3 of the GraphSAINT parallel-training paper: subgraphs are
independent, so p_inter samplers run side by side with no data dependency,
one per core. Here each is a Ray actor (:mod:`worker`); this class starts
them, has them estimate the normalization first, restarts the ones that die
(Ray restarts the process, the supervisor restarts production and counts it),
adds and removes workers on request and stops them all on :meth:`stop`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from saintpipe.core.credentials import redis_url_with_password
from saintpipe.core.errors import ConfigError, InvalidArgument, SaintpipeError, WorkerFailed
from saintpipe.core.report import plural
from saintpipe.services.pool.connection import redact_url
from saintpipe.services.sampler_service.config import SamplerServiceConfig
from saintpipe.services.sampler_service.counters import WorkerCounters
from saintpipe.services.sampler_service.metrics import MetricsServer, MetricsSnapshot
from saintpipe.services.sampler_service.slots import WorkerSlot, process_of
from saintpipe.services.sampler_service.worker import SamplerProcess, SamplerWorker, WorkerInfo, WorkerSpec

if TYPE_CHECKING:
    from saintpipe.services.pool.pool import SubgraphPool
    from saintpipe.services.pool.redis_server import RedisServer
    from saintpipe.services.sampler_service.normalization import SharedOnline

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class WorkerStats:
    worker: int
    pid: int | None
    restarts: int
    counters: WorkerCounters


@dataclasses.dataclass(frozen=True)
class ServiceStats:
    """A point-in-time view: running workers, removed workers' final counts, the pool, a fatal error,
    and where each running worker is (worker index -> hostname of its Ray node; absent until known)."""

    workers: list[WorkerStats]
    removed: dict[int, WorkerCounters]
    pool: dict[str, int] | None
    failure: str | None = None
    placement: dict[int, str] = dataclasses.field(default_factory=dict)

    @property
    def subgraphs(self) -> int:
        return sum(w.counters.subgraphs for w in self.workers) + sum(c.subgraphs for c in self.removed.values())

    @property
    def restarts(self) -> int:
        return sum(w.restarts for w in self.workers)


class SamplerService:
    """Supervise the sampler workers of one training job.

    Args:
        config: the service configuration.

    Example:
        >>> service = SamplerService(SamplerServiceConfig(data="data/demo", pool={"url": url}))  # doctest: +SKIP
        >>> service.start(4)             # normalization first, then 4 producing workers
        >>> service.add_workers(2); service.remove_workers(1)
        >>> service.stats().subgraphs
        >>> service.stop()
    """

    def __init__(self, config: SamplerServiceConfig) -> None:
        self.config = config
        self.redis_url: str | None = config.pool.url
        self.normalization_reused: bool | None = None
        self.graph: str | None = None  # the graph sampled ("full" or "train"), known once started
        self._lock = threading.RLock()
        self._slots: dict[int, WorkerSlot] = {}
        # Process g hosts workers [g*k, g*k + k) for k = workers_per_process (one each by default).
        self._processes: dict[int, SamplerProcess] = {}
        self._removed: dict[int, WorkerSlot] = {}
        self._pool_stats: dict[str, int] | None = None
        self._failure: str | None = None
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._metrics: MetricsServer | None = None
        self._redis_server: RedisServer | None = None
        self._owns_ray = False
        self._pool: SubgraphPool | None = None
        self._spec: WorkerSpec | None = None
        self._norm_ref: ray.ObjectRef[Any] | None = None
        self._orientation_ref: str | list[Any] | None = None
        self._online: SharedOnline | None = None  # online normalization: the state this host's workers share, and its refresher
        self._wire: str | None = None  # overrides the pool config's wire for every worker ("full"), or None

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
        from saintpipe.services.dataset.sample_graph import open_sample_graph
        from saintpipe.services.dataset.store import open_dataset
        from saintpipe.services.sampler_service.normalization import ensure_normalization, share_online

        dataset = open_dataset(self.config.data)  # fail here, naming the path, not inside N actors
        # The training graph is opened (its checksums checked) or built and stored here, once, not in N actors.
        graph = open_sample_graph(dataset, self.config.graph)
        self.graph = graph.kind
        try:
            self._connect_ray()
            self._connect_redis()
            pool = self.config.pool.model_copy(update={"url": self.redis_url})
            # A training graph that could not be stored goes to the workers through the object store.
            in_memory = (ray.put((graph.indptr, graph.indices, graph.nodes))
                         if graph.kind == "train" and not graph.stored else None)
            self._spec = WorkerSpec(data=str(Path(self.config.data).resolve()), job_seed=self.config.seed,
                                    sampler=self.config.sampler.model_dump(mode="json"),
                                    pool=pool.model_dump(mode="json"), push_poll_s=self.config.push_poll_s,
                                    graph=graph.kind, train_graph=in_memory,
                                    per_process=self.config.workers_per_process)
            self._orientation_ref = self._share_orientation(dataset, graph)
            with self._lock:
                self._slots = {i: WorkerSlot(i, self._new_worker(i)) for i in range(n)}
            self._warn_if_oversubscribed(n)
            norm, self.normalization_reused = ensure_normalization(
                graph, self.config.sampler, [s.worker for s in self._slots.values()],
                self.config.presamples(int(dataset.splits["train"].size)),
                self.config.norm_seed, method=self.config.normalization_method(),
                strength=self.config.norm_strength)
            if norm is not None and norm.method == "online":
                self._online = share_online(norm)
                norm = self._online.normalization if self._online is not None else norm
            # One copy per node in the object store, read zero-copy by every worker there (also by workers
            # on hosts that do not see this dataset directory).
            self._norm_ref = ray.put(norm) if norm is not None else None
            if self._online is not None and self._norm_ref is not None:  # online: a normalization was put
                # The refresher's prior is the object store's copy: the supervisor keeps no private one of it.
                self._online.start(graph, ray.get(self._norm_ref))
            self._wire = self._wire_fallback(graph, norm)
            with self._lock:
                for slot in self._slots.values():
                    slot.run_ref = slot.worker.run_async(self._norm_ref, self._wire)
            if self.config.metrics_port is not None:
                self._metrics = MetricsServer(self._snapshot, self.config.metrics_host, self.config.metrics_port)
                log.info("sampler metrics on %s", self._metrics.url)
        except BaseException:
            self.stop()
            raise
        self._monitor = threading.Thread(target=self._monitor_loop, name="sampler-supervisor", daemon=True)
        self._monitor.start()
        log.info("sampler service: %s filling pool %r at %s", plural(n, "worker"), self.config.job,
                 redact_url(self.redis_url))

    def _share_orientation(self, dataset, graph) -> str | list | None:
        """The graph's oriented lists for every worker, built once: the directory they are stored in with the
        dataset (each worker maps them from the page cache; built there on the first start), else a reference
        per array in the object store (one copy per node, read zero-copy); None when the sampler scans whole
        rows or the graph is not symmetric."""
        if self.config.sampler.induction != "oriented":
            return None
        from saintpipe.services.dataset.oriented import open_or_build_orientation

        orientation, directory = open_or_build_orientation(dataset, graph)
        if orientation is None or directory is not None:
            return None if orientation is None else str(directory)
        # One array at a time, each freed here once the store has it: the lists and their stored copy are
        # never both whole in memory (1.74 GB each at Kronecker scale 24).
        arrays: list[Any] = list(orientation)
        del orientation
        refs = []
        for i in range(len(arrays)):
            refs.append(ray.put(arrays[i]))
            arrays[i] = None
        return refs

    def stop(self) -> None:
        """Stop every worker (each finishes or abandons its current push), then release what start took."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join(timeout=self.config.health_interval_s + 10)
        with self._lock:
            slots = list(self._slots.values())
        self._stop_slots(slots)
        if self._online is not None:
            self._online.close()
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

    @property
    def failure(self) -> str | None:
        """Why the service gave up on a worker, or None while all is well."""
        return self._failure

    def raise_if_failed(self) -> None:
        """Raise :class:`WorkerFailed` when a worker kept failing (see ``max_consecutive_failures``)."""
        if self._failure is not None:
            raise WorkerFailed(self._failure)

    # --- scaling ------------------------------------------------------------
    def add_workers(self, k: int) -> list[int]:
        """Start ``k`` more workers on the lowest free indices; a reused index continues its sequence."""
        if k < 1:
            raise InvalidArgument(f"add_workers: k must be >= 1, got {k}")
        added = []
        with self._lock:
            for _ in range(k):
                index = next(i for i in range(len(self._slots) + k + 1) if i not in self._slots)
                slot = self._removed.pop(index, None) or WorkerSlot(index)  # counts are kept per index
                slot.worker = self._new_worker(index)
                slot.consecutive_failures, slot.restarting = 0, False
                slot.run_ref = slot.worker.run_async(self._norm_ref, self._wire)
                self._slots[index] = slot
                added.append(index)
            total = len(self._slots)
        self._warn_if_oversubscribed(total)
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
                slot.retired, slot.current, slot.pid = slot.total, WorkerCounters(), None
                slot.worker = slot.run_ref = None
                self._removed[slot.index] = slot
        log.info("sampler service: removed workers %s", indices)
        return indices

    # --- views --------------------------------------------------------------
    def stats(self) -> ServiceStats:
        """Per-worker totals (all incarnations), restarts, the pool's stats and any fatal error."""
        self._poll()
        with self._lock:
            workers = [WorkerStats(s.index, s.pid, s.restarts, s.total) for _, s in sorted(self._slots.items())]
            removed = {i: s.total for i, s in self._removed.items()}
            placement = {i: s.host for i, s in sorted(self._slots.items()) if s.host}
            return ServiceStats(workers, removed, self._pool_stats, self._failure, placement)

    def process_cpu_seconds(self) -> float:
        """CPU seconds (user + system) the running workers' processes have used since they started, as the OS
        counts them: their start-up, drawing, pushing and waiting, every thread; each process once, however
        many workers it hosts. NaN when a worker's process is not on this host, or gone.

        It is what the samplers cost the machine, for a benchmark to compare (``saintpipe bench sweep``);
        a process restarted in between counts from its restart.
        """
        import socket

        import psutil

        stats = self.stats()
        here = socket.gethostname()
        if any(host != here for host in stats.placement.values()):
            return float("nan")
        pids = sorted({w.pid for w in stats.workers if w.pid is not None})
        if not pids:
            return float("nan")
        total = 0.0
        for pid in pids:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:  # ended (or not ours to read): the figure would be short
                return float("nan")
            total += times.user + times.system
        return total

    def worker_info(self, timeout: float = 60.0) -> list[WorkerInfo]:
        """Where each running worker is (pid, core, host); waits for workers still starting."""
        with self._lock:
            workers = [s.worker for _, s in sorted(self._slots.items())]
        return [w.info(timeout=timeout) for w in workers]

    @property
    def metrics_url(self) -> str | None:
        return self._metrics.url if self._metrics is not None else None

    # --- internals ------------------------------------------------------------
    def _new_worker(self, index: int) -> SamplerWorker:
        """Worker ``index`` in its process (:func:`process_of`), started when it is not running."""
        if self._spec is None:  # start() makes it before the first worker
            raise RuntimeError("the sampler service has no worker spec before start()")
        k = self.config.workers_per_process
        group = process_of(index, k)
        process = self._processes.get(group)
        if process is None or process.killed:
            # Ray reserves CPUs for the workers this process will host now (not for a short last group's
            # missing ones, which a cluster sized by `workers` would not have).
            size = max(1, min(k, max(self.config.workers, len(self._slots), index + 1) - group * k))
            process = self._processes[group] = SamplerProcess(
                index, self._spec, size=size, num_cpus=self.config.num_cpus_per_worker,
                max_restarts=self.config.max_restarts)
        return SamplerWorker(index, process, orientation=self._orientation_ref)

    def _connect_ray(self) -> None:
        from saintpipe.core.ray_cluster import connect_ray

        # A local cluster: more logical CPUs than cores when asked for more workers (they then share cores).
        cpus = max(len(os.sched_getaffinity(0)), int(self.config.workers * self.config.num_cpus_per_worker))
        if connect_ray(self.config.ray_address, num_cpus=cpus):
            self._owns_ray = True

    def _connect_redis(self) -> None:
        from saintpipe.services.pool.pool import SubgraphPool
        from saintpipe.services.pool.redis_server import RedisServer

        if self.redis_url is None:
            # SAINTPIPE_REDIS_URL when set, else a private redis-server that stop() stops.
            self._redis_server = RedisServer().start()
            self.redis_url = self._redis_server.url
        # The workers may run on other Ray nodes, without this host's password file: they get the password in
        # the URL of their spec (in memory, never in argv).
        self.redis_url = redis_url_with_password(self.redis_url)
        self._pool = SubgraphPool.from_config(self.config.pool, url=self.redis_url)

    def _wire_fallback(self, graph, norm) -> str | None:
        """``"full"`` when node sets could not be induced by trainers (the normalization, or the training graph
        it indexes, is not stored with the dataset, which they read them from) and the pool's wire is ``auto``;
        else None (the config's wire).

        Raises:
            ConfigError: the wire is ``nodes`` and the normalization or the training graph could not be stored.
        """
        from saintpipe.services.dataset.normalization import graph_norm_dir, load_stored
        from saintpipe.services.dataset.sample_graph import as_sample_graph

        graph = as_sample_graph(graph)  # a SampleGraph, or a dataset (its full graph)
        if self.config.pool.wire == "full" or norm is None:
            return None
        if self.config.pool.wire == "auto" and self._pool is not None and self._pool.wire != "nodes":
            return None  # whole subgraphs anyway (shared memory)
        if norm.method == "online":
            # Each worker's coefficients move as it counts; a trainer could not compute the same weights.
            if self.config.pool.wire == "nodes":
                raise ConfigError("pool wire 'nodes' needs stored coefficients, and the online normalization's "
                                  "change as the workers count: set [samplers] normalization to exact, smoothed "
                                  "or reference, or pool wire to 'full'")
            log.info("online normalization: the workers send whole subgraphs (pool wire 'full')")
            return "full"
        if not graph.stored:  # the training graph, kept in memory: the coefficients index it
            what, where = "training graph", graph.path / "train_graph"
        elif load_stored(graph, self.config.sampler, norm.num_subgraphs, norm.seed, method=norm.method) is not None:
            return None
        else:
            what, where = "normalization", graph_norm_dir(graph, self.config.sampler, norm.method)
        if self.config.pool.wire == "nodes":
            raise ConfigError(f"pool wire 'nodes': the {what} could not be stored in {where} (a read-only "
                              "dataset directory?), where trainers read it to induce node sets; make it writable "
                              "or set pool wire to 'full'")
        log.warning("the %s could not be stored in %s, where trainers would read it to induce node "
                    "sets: the workers send whole subgraphs (pool wire 'full')", what, where)
        return "full"

    def _warn_if_oversubscribed(self, n: int) -> None:
        cpus = ray.cluster_resources().get("CPU", 0)
        if n * self.config.num_cpus_per_worker > cpus:
            log.warning("sampler service: %g CPUs wanted for %s but the Ray cluster has %g; the extra workers "
                        "wait for a CPU", n * self.config.num_cpus_per_worker, plural(n, "worker"), cpus)

    def _stop_slots(self, slots: list[WorkerSlot]) -> None:
        live = [s for s in slots if s.worker is not None]
        for slot in live:
            with contextlib.suppress(ray.exceptions.RayError):
                slot.worker.stop_async()
        refs = [s.run_ref for s in live if s.run_ref is not None]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=self.config.stop_timeout_s)
        self._poll(live)
        released = []
        for slot in live:
            with contextlib.suppress(ray.exceptions.RayError):
                released.append(slot.worker.release_core_async())
        if released:
            ray.wait(released, num_returns=len(released), timeout=5.0)
        for slot in live:
            slot.worker.kill()

    def _monitor_loop(self) -> None:
        while not self._stopping.wait(self.config.health_interval_s):
            try:
                self._supervise()
                self._poll()
            except Exception:  # the supervisor must outlive any one bad check
                log.exception("sampler supervisor: check failed")

    def _supervise(self) -> None:
        """Notice runs that ended, and start again the ones whose retry time has come."""
        with self._lock:
            running = {s.run_ref: s for s in self._slots.values() if s.run_ref is not None}
        done = ray.wait(list(running), num_returns=len(running), timeout=0)[0] if running else []
        for ref in done:
            self._record_failure(running[ref], ref)
        now = time.monotonic()
        with self._lock:
            for slot in self._slots.values():
                if slot.run_ref is None and slot.retry_at <= now and not self._stopping.is_set():
                    slot.run_ref = slot.worker.run_async(self._norm_ref, self._wire)

    def _record_failure(self, slot: WorkerSlot, ref) -> None:
        kind = "exception"
        try:
            ray.get(ref)
            reason = "run() returned without being stopped"
        except ray.exceptions.RayTaskError as exc:  # an exception inside run(): the process lives on
            reason = f"run() raised {exc.cause!r}" if getattr(exc, "cause", None) else f"run() raised: {exc}"
        except ray.exceptions.ActorDiedError as exc:
            kind, reason = "died", f"its actor is dead for good ({exc.__class__.__name__}; Ray's restarts used up)"
        except ray.exceptions.RayError as exc:
            kind, reason = "unavailable", f"its process died ({type(exc).__name__})"
        with self._lock:
            if self._stopping.is_set() or self._slots.get(slot.index) is not slot:
                return  # stopped or removed meanwhile: not a failure
            if not slot.record_failure(reason, kind, time.monotonic()):
                return
            log.warning("sampler worker %d failed (restart %d): %s", slot.index, slot.restarts, reason)
            if slot.consecutive_failures >= self.config.max_consecutive_failures:
                self._failure = (f"sampler worker {slot.index} failed {slot.consecutive_failures} times in a row "
                                 f"without pushing a subgraph; last error: {reason}")
                log.error("%s; not restarting it", self._failure)
                slot.retry_at = float("inf")
            elif kind == "died":
                # A new actor takes the index and continues its sequence from Redis (the first of its process's
                # workers to notice starts the process; the others join it).
                slot.worker.kill(whole_process=True)
                slot.worker = self._new_worker(slot.index)

    def _poll(self, slots: list[WorkerSlot] | None = None) -> None:
        """Fetch every worker's counters and the pool's stats."""
        with self._lock:
            slots = list(self._slots.values()) if slots is None else slots
        refs = [(s, s.worker.counters_async()) for s in slots if s.worker is not None]
        for slot, ref in refs:
            try:
                pid, counters = ray.get(ref, timeout=5.0)
            except (ray.exceptions.RayError, TimeoutError):
                continue  # restarting; the next poll catches up
            with self._lock:
                slot.observe_counters(pid, counters)
        self._place([s for s in slots if s.placement_stale])
        if self._pool is not None:
            try:
                stats = self._pool.stats()
            except SaintpipeError as exc:
                log.warning("sampler supervisor: cannot read the pool's stats: %s", exc)
                return
            self._pool_stats = dataclasses.asdict(stats)
            if self._metrics is not None:
                try:  # per consumer group: a sweep's trials each have one (the default group alone otherwise)
                    by_group = self._pool.group_stats()
                except SaintpipeError as exc:
                    log.warning("sampler supervisor: cannot read the pool's groups: %s", exc)
                    return
                self._metrics.pool.update_groups(self.config.job, by_group)

    def _place(self, slots: list[WorkerSlot]) -> None:
        """Learn where new incarnations run; log the whole placement when it changed.

        Across hosts this is what shows a lost node's workers coming back on another one.
        """
        if not slots:
            return
        refs = [(s, s.worker.info_async()) for s in slots]
        changed = False
        for slot, ref in refs:
            try:
                info = ray.get(ref, timeout=5.0)
            except (ray.exceptions.RayError, TimeoutError):
                continue  # restarting; the next poll asks again
            with self._lock:
                changed |= (slot.host, slot.node_id) != (info.hostname, info.node_id)
                slot.host, slot.node_id, slot.placed_pid = info.hostname, info.node_id, info.pid
        if changed:
            with self._lock:
                where = ", ".join(f"worker {i} on {s.host or '?'} (node {s.node_id[:8] or '?'}, pid {s.pid})"
                                  for i, s in sorted(self._slots.items()))
                hosts = sorted({s.host for s in self._slots.values() if s.host})
            log.info("sampler placement: %s; %d host(s): %s", where, len(hosts), ", ".join(hosts))

    def _snapshot(self) -> MetricsSnapshot:
        with self._lock:
            slots = {**self._removed, **self._slots}
            return MetricsSnapshot({i: s.total for i, s in slots.items()},
                                   {i: s.restarts for i, s in slots.items()})
