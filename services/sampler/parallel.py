"""Inter-sampler parallelism: one worker process per core, pinned, each with its own random stream.

GraphSAINT section 4.3 binds one sampler to one core and runs as many as
there are cores. :func:`run_pinned` forks ``processes`` workers, pins worker
``w`` to core ``cores[w % len(cores)]`` with ``os.sched_setaffinity`` and
runs ``fn(ctx)`` in each. Workers are forked, so a sampler built in the parent
(alias tables, the memory-mapped graph) is shared copy-on-write, not rebuilt
or pickled; only results travel back (pickled over a queue).

Random streams: subgraph ``sequence`` of worker ``worker`` in job
``job_seed`` is drawn with :func:`subgraph_seed`, a value of numpy's
``SeedSequence(job_seed, spawn_key=(worker, sequence))``: streams of
different workers or jobs are independent, and any subgraph can be drawn
again from its three numbers.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import pickle
import queue as queue_mod
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeVar

import numpy as np

from saintpipe.core.bars import ProgressBar
from saintpipe.core.errors import InvalidArgument
from saintpipe.core.malloc import tune_malloc

log = logging.getLogger(__name__)

T = TypeVar("T")
_POLL_S = 0.2


def stream_seed(entropy: int, *key: int) -> int:
    """A 64-bit seed from ``SeedSequence(entropy, spawn_key=key)``."""
    if entropy < 0 or any(k < 0 for k in key):
        raise InvalidArgument(f"seed entropy and keys must be >= 0, got {entropy} and {key}")
    return int(np.random.SeedSequence(int(entropy), spawn_key=tuple(int(k) for k in key))
               .generate_state(1, np.uint64)[0])


def subgraph_seed(job_seed: int, worker: int, sequence: int) -> int:
    """The seed of the ``sequence``-th subgraph of ``worker`` in the job seeded ``job_seed``."""
    return stream_seed(job_seed, worker, sequence)


# The spawn key's first word for dependent chains: above any worker index, so no subgraph seed equals a chain key.
CHAIN_STREAM = 0xD3B7_C4A1


def chain_key(job_seed: int, worker: int) -> int:
    """The key of worker ``worker``'s dependent chain (``kappa > 1``) in the job seeded ``job_seed``.

    One chain per worker: its sequence numbers are the chain's steps, so the
    subgraphs a worker pushes one after the other share most of their nodes
    (docs/explanation/sampler.md says why per worker and not one chain for the job).
    """
    return stream_seed(job_seed, CHAIN_STREAM, worker)


def subgraph_seeds(job_seed: int, worker: int, start: int, count: int) -> list[int]:
    """``subgraph_seed`` of sequences ``start .. start + count - 1``, computed back to back.

    A producer asks for a block at a time: a derivation right after a sampling
    kernel runs on cold caches, several times slower than one of a block.
    """
    return [stream_seed(job_seed, worker, s) for s in range(start, start + count)]


def available_cores() -> list[int]:
    """The cores this process may run on."""
    return sorted(os.sched_getaffinity(0))


@dataclass
class WorkerContext:
    """What a worker function gets: its index, the worker count, its core, and two helpers."""

    worker: int
    num_workers: int
    core: int | None
    _queue: Any = field(repr=False, default=None)
    _barrier: Any = field(repr=False, default=None)

    def report(self, done: int) -> None:
        """Advance the parent's progress bar by ``done`` items."""
        if self._queue is not None and done:
            self._queue.put(("progress", self.worker, done))

    def start_together(self) -> None:
        """Wait until every worker is ready (for timings that must overlap)."""
        if self._barrier is not None:
            self._barrier.wait()


def _child(fn: Callable[[WorkerContext], Any], ctx: WorkerContext) -> None:
    try:
        if ctx.core is not None:
            os.sched_setaffinity(0, {ctx.core})
        tune_malloc()  # as the service's workers: the kernels' per-subgraph scratch stays in the heap
        result = fn(ctx)
        ctx._queue.put(("result", ctx.worker, result))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        try:
            pickle.dumps(exc)
            payload: Any = exc
        except Exception:  # noqa: BLE001
            payload = None
        ctx._queue.put(("error", ctx.worker, payload, traceback.format_exc()))
    finally:
        ctx._queue.close()
        ctx._queue.join_thread()


def run_pinned(fn: Callable[[WorkerContext], T], processes: int | None = None, *,
               progress_total: int | None = None, progress_desc: str = "sampling",
               fork_single: bool = True) -> list[T]:
    """Run ``fn(ctx)`` in ``processes`` pinned worker processes; results in worker order.

    Args:
        fn: the work of one worker (a closure is fine: workers are forked).
        processes: number of workers, default one per available core.
        progress_total: show a tqdm bar of this many items, advanced by ``ctx.report``.
        fork_single: with one worker, still fork a pinned process (timings comparable
            with the many-worker case); if False, run ``fn`` in this process, unpinned.

    Raises:
        InvalidArgument: ``processes < 1``.
        The worker's own exception (or RuntimeError with its traceback) when a worker fails.
    """
    cores = available_cores()
    processes = len(cores) if processes is None else int(processes)
    if processes < 1:
        raise InvalidArgument(f"processes must be >= 1, got {processes}")
    if processes == 1 and not fork_single:
        with _bar(progress_total, progress_desc) as bar:
            return [fn(_InlineContext(bar))]
    context = mp.get_context("fork")
    queue = context.Queue()
    barrier = context.Barrier(processes)
    procs = []
    for w in range(processes):
        ctx = WorkerContext(w, processes, cores[w % len(cores)], queue, barrier)
        proc = context.Process(target=_child, args=(fn, ctx), name=f"saintpipe-sampler-{w}", daemon=True)
        proc.start()
        procs.append(proc)
    results: dict[int, Any] = {}
    try:
        with _bar(progress_total, progress_desc) as bar:
            while len(results) < processes:
                try:
                    message = queue.get(timeout=_POLL_S)
                except queue_mod.Empty:
                    dead = [p for i, p in enumerate(procs)
                            if i not in results and p.exitcode not in (None, 0)]
                    if dead:
                        raise RuntimeError(
                            f"sampler worker {dead[0].name} died with exit code {dead[0].exitcode}")
                    continue
                kind, worker = message[0], message[1]
                if kind == "progress":
                    bar.update(message[2])
                elif kind == "result":
                    results[worker] = message[2]
                else:
                    exc, text = message[2], message[3]
                    log.error("sampler worker %d failed:\n%s", worker, text)
                    if exc is not None:
                        raise exc
                    raise RuntimeError(f"sampler worker {worker} failed:\n{text}")
    finally:
        for proc in procs:
            if proc.is_alive() and len(results) < processes:
                proc.terminate()
        for proc in procs:
            proc.join(timeout=10)
        queue.close()
    return [results[w] for w in range(processes)]


def _bar(total: int | None, desc: str) -> ProgressBar:
    return ProgressBar(total=total, desc=desc, disable=total is None, leave=False)


class _InlineContext(WorkerContext):
    def __init__(self, bar: ProgressBar) -> None:
        super().__init__(0, 1, None)
        self._bar = bar

    def report(self, done: int) -> None:
        self._bar.update(done)


class SubgraphSource(Protocol):
    def sample(self, seed: int) -> Any: ...


@dataclass(frozen=True)
class Throughput:
    """Figures of a timed run: totals over workers and the rate summed over workers."""

    processes: int
    subgraphs: int
    nodes: int
    edges: int
    subgraphs_per_s: float
    nodes_per_s: float
    edges_per_s: float


def measure_throughput(source: SubgraphSource, *, seconds: float, processes: int = 1,
                       job_seed: int = 0) -> Throughput:
    """Sample for ``seconds`` in each of ``processes`` pinned workers, all starting together.

    Each worker draws one warm-up subgraph, waits for the others, then samples
    with its own stream until its time is up (at least one subgraph). Rates are
    summed over workers (each worker's count over its own elapsed time).
    """
    if seconds <= 0:
        raise InvalidArgument(f"seconds must be > 0, got {seconds}")

    def work(ctx: WorkerContext) -> tuple[int, int, int, float]:
        source.sample(subgraph_seed(job_seed, ctx.worker, 2**32))
        ctx.start_together()
        count = nodes = edges = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            g = source.sample(subgraph_seed(job_seed, ctx.worker, count))
            count += 1
            nodes += g.num_nodes
            edges += g.num_edges
            now = time.perf_counter()
            if now >= deadline:
                return count, nodes, edges, now - start

    parts = run_pinned(work, processes)
    return Throughput(
        processes=processes,
        subgraphs=sum(p[0] for p in parts),
        nodes=sum(p[1] for p in parts),
        edges=sum(p[2] for p in parts),
        subgraphs_per_s=sum(p[0] / p[3] for p in parts),
        nodes_per_s=sum(p[1] / p[3] for p in parts),
        edges_per_s=sum(p[2] / p[3] for p in parts),
    )
