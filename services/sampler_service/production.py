"""The production loop of one worker: draw a subgraph, push it, count.

Drawing is CPU work on the worker's core. When the pool keeps the bytes in
Redis, a push is mostly waiting for Redis to take a megabyte or two; doing the
two one after the other would leave the core idle during every push, so the
push of subgraph k runs on a helper thread and overlaps the drawing of
subgraph k+1 (a hand-off of depth one: at most one subgraph waits for the
pusher). When the pool's transport is shared memory, a push is CPU work too
(one pass into a slot, then a ~100-byte round trip) and nothing is left to
overlap on one core: the worker pushes on its own thread, sparing the
hand-off between threads. Either way, when the pool is full the push waits
and drawing stops too: nothing is ever dropped to make room.

Sequence numbers are reserved before drawing (:mod:`sequence`), so a crash or
a stop leaves gaps (the rest of the reserved block, the subgraph being drawn
and the one being pushed), never a repeated (worker, sequence) pair.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from typing import Any

from saintpipe.errors import SaintpipeTimeout
from services.sampler.parallel import subgraph_seed
from services.sampler_service.counters import WorkerCounters

_HANDOFF_POLL_S = 0.1


class Producer:
    """Draws and pushes one worker's subgraphs until a stop event is set.

    Args:
        sampler: the configured sampler (``sample(seed) -> Subgraph``).
        pool: the job's :class:`~services.pool.pool.SubgraphPool`.
        cursor: the worker's :class:`~services.sampler_service.sequence.SequenceCursor`.
        job_id, worker, job_seed: stamped on every subgraph; the seed of sequence s is
            ``subgraph_seed(job_seed, worker, s)``.
        push_poll_s: how long one push waits on a full pool before looking at the stop event again.
        inline: push on the drawing thread (default: when the pool's transport is shared memory).
    """

    def __init__(self, sampler: Any, pool: Any, cursor: Any, *, job_id: str, worker: int, job_seed: int,
                 push_poll_s: float, inline: bool | None = None) -> None:
        self._sampler, self._pool, self._cursor = sampler, pool, cursor
        self._job_id, self._worker, self._job_seed = job_id, worker, job_seed
        self._push_poll_s = push_poll_s
        self._inline = getattr(pool, "transport", "redis") == "shared_memory" if inline is None else inline
        self._lock = threading.Lock()
        self._counters = WorkerCounters()
        self._waiting_since: float | None = None
        self._error: BaseException | None = None
        self._cpu_start = time.process_time()

    def snapshot(self) -> WorkerCounters:
        """The counts so far, a wait on a full pool in progress included (so counters never dip)."""
        with self._lock:
            snap = WorkerCounters.from_dict(self._counters.to_dict())
            if self._waiting_since is not None:
                snap.pool_wait_seconds += time.perf_counter() - self._waiting_since
        snap.cpu_seconds = time.process_time() - self._cpu_start
        return snap

    def run(self, stop: threading.Event) -> int:
        """Produce until ``stop`` is set; return how many subgraphs were pushed.

        Raises:
            whatever drawing or pushing raised (ServiceUnavailable when Redis stays away, ...).
        """
        self._error = None  # a failed earlier run() of this producer is behind us
        if self._inline:
            while not stop.is_set() and self._deliver(*self._draw(), stop):
                pass
            return self._counters.subgraphs
        handoff: queue.Queue = queue.Queue(maxsize=1)
        done = threading.Event()
        pusher = threading.Thread(target=self._push_loop, args=(handoff, stop, done), name="sampler-pusher",
                                  daemon=True)
        pusher.start()
        try:
            while not stop.is_set() and self._error is None:
                item = self._draw()
                while not stop.is_set() and self._error is None:
                    try:
                        handoff.put(item, timeout=_HANDOFF_POLL_S)
                        break
                    except queue.Full:  # the pusher still holds the previous one (a full pool)
                        continue
        finally:
            done.set()
            pusher.join()
        if self._error is not None:
            raise self._error
        return self._counters.subgraphs

    def _draw(self) -> tuple[Any, tuple[float, float]]:
        """The next subgraph, stamped, and the (wall, CPU) seconds its drawing took."""
        sequence = self._cursor.reserve()  # before drawing: a crash leaves a gap, not a repeat
        seed = subgraph_seed(self._job_seed, self._worker, sequence)
        t0, c0 = time.perf_counter(), time.thread_time()
        subgraph = self._sampler.sample(seed)
        took = (time.perf_counter() - t0, time.thread_time() - c0)
        return replace(subgraph, job_id=self._job_id, worker=self._worker, sequence=sequence, seed=seed), took

    def _deliver(self, subgraph: Any, took: tuple[float, float], stop: threading.Event) -> bool:
        """Push and count one subgraph; False when stopped while waiting for room."""
        waited = self._push(subgraph, stop)
        with self._lock:  # one step: a wait in progress becomes a finished one
            if waited is not None:
                self._counters.observe(subgraph.num_nodes, subgraph.num_edges, took[0], waited, took[1])
            elif self._waiting_since is not None:  # stopped while waiting: the wait still happened
                self._counters.pool_wait_seconds += time.perf_counter() - self._waiting_since
            self._waiting_since = None
        return waited is not None

    def _push_loop(self, handoff: queue.Queue, stop: threading.Event, done: threading.Event) -> None:
        try:
            while True:
                try:
                    subgraph, took = handoff.get(timeout=_HANDOFF_POLL_S)
                except queue.Empty:
                    if done.is_set():
                        return
                    continue
                if stop.is_set() or not self._deliver(subgraph, took, stop):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to run(), which raises it in the actor call
            self._error = exc

    def _push(self, subgraph: Any, stop: threading.Event) -> float | None:
        """Push, waiting while the pool is full; the seconds waited, or None when stopped first."""
        try:
            self._pool.put(subgraph, timeout=0)
            return 0.0
        except SaintpipeTimeout:
            pass
        t0 = time.perf_counter()
        with self._lock:
            self._waiting_since = t0
        while not stop.is_set():
            try:
                self._pool.put(subgraph, timeout=self._push_poll_s)
                return time.perf_counter() - t0
            except SaintpipeTimeout:
                continue
        return None
