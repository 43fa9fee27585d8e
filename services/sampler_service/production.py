"""The production loop of one worker: draw a subgraph, push it, count.

Drawing is CPU work on the worker's core; a push is partly CPU work (encoding,
or one pass into a shared-memory slot) and partly waiting for Redis. The
waiting is overlapped with the next draw:

* shared memory (``pool.transport == "shared_memory"``): the push is split.
  ``pool.put_nowait`` writes the slot and sends the ~100-byte put on the
  drawing thread; Redis handles it on another core while subgraph k+1 is
  drawn, and ``pool.settle`` then reads the answer that has long arrived.
  One thread, no hand-off, no idle round trip.
* bytes in Redis: sending a megabyte or two is itself mostly waiting, so the
  push of subgraph k runs on a helper thread and overlaps the drawing of
  subgraph k+1 (a hand-off of depth one: at most one subgraph waits for the
  pusher).
* node sets (pool wire ``nodes``, given an ``induction``): the worker draws
  only the node set (no induction, no weights: the trainer does those,
  :mod:`saintpipe.minibatch.expand`) and puts a message of a few KB, pipelined
  on the drawing thread as with shared memory (too little work for a hand-off).

In every case, when the pool is full the push waits and drawing stops too:
nothing is ever dropped to make room.

Sequence numbers are reserved before drawing (:mod:`sequence`), so a crash or
a stop leaves gaps (the rest of the reserved block, the subgraph being drawn
and the one being pushed), never a repeated (worker, sequence) pair. Their
seeds are derived a block at a time, on warm caches rather than after each
kernel call.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import replace
from typing import Any

from saintpipe.core.errors import SaintpipeTimeout
from saintpipe.core.subgraph import Induction, SubgraphNodes
from saintpipe.services.pool.codec import DIRECT_AVAILABLE, MessageFramer, seal_subgraph
from saintpipe.services.sampler.parallel import subgraph_seeds
from saintpipe.services.sampler_service.counters import WorkerCounters

log = logging.getLogger(__name__)

_HANDOFF_POLL_S = 0.1
# Seeds derived per batch (a sequence block is 16).
_SEED_BATCH = 16
# Subgraphs drawn into a slot are checked at the producer one in this many (the first included).
_CHECK_EVERY = 64


class _Stopped(Exception):
    """A stop came while the previous put waited for room, in the middle of a draw."""


class ThreadsCpu:
    """CPU seconds spent by a producer's own threads since they entered (a worker that shares its process
    with others: the process's CPU time would count theirs too). Live threads are read by their clocks;
    a thread that leaves adds what it spent, so the sum never dips."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[int, tuple[int, float]] = {}  # thread ident -> (its CPU clock, its CPU time at entry)
        self._ended = 0.0

    def enter(self) -> None:
        ident = threading.get_ident()
        with self._lock:
            self._live[ident] = (time.pthread_getcpuclockid(ident), time.thread_time())

    def leave(self) -> None:
        with self._lock:
            entry = self._live.pop(threading.get_ident(), None)
            if entry is not None:
                self._ended += time.thread_time() - entry[1]

    def seconds(self) -> float:
        with self._lock:
            total = self._ended
            for clock, start in self._live.values():
                try:
                    total += time.clock_gettime(clock) - start
                except OSError:  # the thread is ending: it adds its time as it leaves
                    continue
            return total


class Producer:
    """Draws and pushes one worker's subgraphs until a stop event is set.

    Args:
        sampler: the configured sampler (``sample(seed) -> Subgraph``).
        pool: the job's :class:`~saintpipe.services.pool.pool.SubgraphPool`.
        cursor: the worker's :class:`~saintpipe.services.sampler_service.sequence.SequenceCursor`.
        job_id, worker, job_seed: stamped on every subgraph; the seed of sequence s is
            ``subgraph_seed(job_seed, worker, s)``.
        push_poll_s: how long one push waits on a full pool before looking at the stop event again.
        inline: push on the drawing thread, pipelined with ``put_nowait``/``settle`` (default: when the
            pool's transport is shared memory, or node sets are sent).
        induction: send node sets (``sampler.sample_nodes``) with this induction instead of whole
            subgraphs (pool wire ``nodes``); None: whole subgraphs.
        own_threads_cpu: count the CPU time of this producer's threads only (its process hosts other
            workers), not the process's.
    """

    def __init__(self, sampler: Any, pool: Any, cursor: Any, *, job_id: str, worker: int, job_seed: int,
                 push_poll_s: float, inline: bool | None = None, induction: Induction | None = None,
                 own_threads_cpu: bool = False) -> None:
        self._sampler, self._pool, self._cursor = sampler, pool, cursor
        self._job_id, self._worker, self._job_seed = job_id, worker, job_seed
        self._push_poll_s = push_poll_s
        self._induction = induction
        shared = getattr(pool, "transport", "redis") == "shared_memory"
        self._inline = (shared or induction is not None) if inline is None else inline
        # Kernels writing into the pool's slot: shared memory, whole subgraphs, a sampler and a pool that can.
        self._direct = (self._inline and shared and induction is None and DIRECT_AVAILABLE
                        and callable(getattr(sampler, "sample_into", None)) and callable(getattr(pool, "prepare", None)))
        self._framer = MessageFramer(job_id, worker) if self._direct else None
        # kappa > 1: the worker's sequence numbers are the steps of its sampler's dependent chain
        # (docs/explanation/sampler.md).
        self._dependent = bool(getattr(sampler, "dependent", False))
        self._lock = threading.Lock()
        self._counters = WorkerCounters()
        self._waiting_since: float | None = None
        self._error: BaseException | None = None
        self._threads_cpu = ThreadsCpu() if own_threads_cpu else None
        self._cpu_start = time.process_time()
        self._seeds: list[int] = []
        self._sealed = 0
        self._seeds_from = 0

    @property
    def sends_nodes(self) -> bool:
        """Whether this producer puts node sets (pool wire ``nodes``) rather than whole subgraphs."""
        return self._induction is not None

    def snapshot(self) -> WorkerCounters:
        """The counts so far, a wait on a full pool in progress included (so counters never dip)."""
        with self._lock:
            snap = self._counters.add(WorkerCounters())  # a copy
            if self._waiting_since is not None:
                snap.pool_wait_seconds += time.perf_counter() - self._waiting_since
        snap.cpu_seconds = (self._threads_cpu.seconds() if self._threads_cpu is not None
                            else time.process_time() - self._cpu_start)
        return snap

    def run(self, stop: threading.Event) -> int:
        """Produce until ``stop`` is set; return how many subgraphs were pushed.

        Raises:
            whatever drawing or pushing raised (ServiceUnavailable when Redis stays away, ...).
        """
        self._error = None  # a failed earlier run() of this producer is behind us
        if self._threads_cpu is not None:
            self._threads_cpu.enter()
        try:
            return self._run(stop)
        finally:
            if self._threads_cpu is not None:
                self._threads_cpu.leave()

    def _run(self, stop: threading.Event) -> int:
        if self._inline:
            self._run_pipelined(stop)
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

    def _run_pipelined(self, stop: threading.Event) -> None:
        """Draw subgraph k+1 while Redis handles the put of k, settle k, send k+1; all on this thread.

        Drawing into the pool's slot, k is settled in the middle of the draw,
        once the node set is induced and before a slot is chosen: the answer
        has arrived by then, and the slot it frees (k-1's, most likely) is the
        one written most recently, so the worker cycles through two slots that
        stay in cache instead of four.
        """
        sent: tuple[Any, tuple[float, float]] | None = None  # (subgraph, took) of the put in flight
        item: tuple[Any, Any, tuple[float, float]] | None = None  # (message, subgraph, took) drawn, not sent yet
        try:
            while not stop.is_set():
                if self._direct:
                    in_flight, sent = sent, None
                    item = self._draw_into_pool(lambda in_flight=in_flight: self._settle_or_stop(in_flight, stop))
                else:
                    subgraph, took = self._draw()
                    item = (subgraph, subgraph, took)  # the pool encodes the subgraph: it is the message
                    if sent is not None:
                        delivered = self._deliver(*sent, stop, sent=True)
                        sent = None
                        if not delivered:  # stopped while the pool was full: given up
                            return
                if stop.is_set():  # drawn, not pushed: a gap in the sequence, as any stop leaves
                    return
                self._pool.put_nowait(item[0])
                sent, item = item[1:], None
            if sent is not None:
                self._deliver(*sent, stop, sent=True)
                sent = None
        except _Stopped:
            sent = None  # stopped while the pool was full: that put was given up
        finally:
            if item is not None and self._direct:  # its slot is free again
                self._pool.cancel(item[0])
            if self._pool.unsettled and (sent is not None or self._direct):  # an error on the way
                try:
                    self._pool.abandon()  # Redis may have it still
                except Exception as exc:  # noqa: BLE001 - the error being raised matters more
                    log.debug("sampler worker %d: could not abandon its last put: %s", self._worker, exc)

    def _settle_or_stop(self, sent: tuple[Any, tuple[float, float]] | None, stop: threading.Event) -> None:
        """Settle the put in flight (waiting while the pool is full); _Stopped if a stop came first."""
        if sent is not None and not self._deliver(*sent, stop, sent=True):
            raise _Stopped

    def _draw_into_pool(self, before_placing: Any) -> tuple[Any, Any, tuple[float, float]]:
        """Draw the next subgraph straight into the pool's shared-memory slot: no copy of it follows.

        The sampler's kernels write the arrays where the encoded message holds
        them (``sample_into`` with a ``MessageFramer``); one pass then hashes
        and checks them in place. ``before_placing()`` runs once the subgraph's
        size is known, before its slot is taken. If no slot can be written, the
        same seed is drawn again the usual way and its bytes go through Redis.
        """
        sequence = self._cursor.reserve()  # before drawing: a crash leaves a gap, not a repeat
        seed = self._seed(sequence)
        drawn: list = []
        pending = [before_placing]

        def write_into(allocate):
            framed: list = []
            placing = [0.0, 0.0]

            def place(num_nodes: int, num_edges: int):
                t, c = time.perf_counter(), time.thread_time()
                if pending:
                    pending.pop()()
                if self._framer is None:  # direct mode only (what `None.frame` raised before)
                    raise AttributeError("this worker writes no message into the pool's shared memory")
                framed.append(self._framer.frame(allocate, num_nodes, num_edges, sequence=sequence, seed=seed))
                placing[:] = time.perf_counter() - t, time.thread_time() - c
                return framed[0].arrays

            t0, c0 = time.perf_counter(), time.thread_time()
            subgraph = self._sampler.sample_into(seed, place, **self._chain_step(sequence))
            took = (time.perf_counter() - t0 - placing[0], time.thread_time() - c0 - placing[1])
            drawn.append((subgraph, took))  # views of the slot: only the sizes are read later
            # Checked at the producer now and then: the kernels are tested to produce valid subgraphs, and
            # every consumer checks each one it decodes (a bad one goes to the dead-letter stream, with a reason).
            self._sealed += 1
            return seal_subgraph(framed[0], validate=self._sealed % _CHECK_EVERY == 1)

        def or_else():
            if pending:
                pending.pop()()
            drawn.append(self._draw_seeded(sequence, seed))
            return drawn[-1][0]

        message = self._pool.prepare(write_into, or_else)
        return message, *drawn[-1]

    def _chain_step(self, sequence: int) -> dict[str, int]:
        """The sampler's ``step`` argument for ``sequence`` (none for a sampler without dependent minibatches)."""
        return {"step": sequence} if self._dependent else {}

    def _seed(self, sequence: int) -> int:
        at = sequence - self._seeds_from
        if not 0 <= at < len(self._seeds):
            self._seeds = subgraph_seeds(self._job_seed, self._worker, sequence, _SEED_BATCH)
            self._seeds_from, at = sequence, 0
        return self._seeds[at]

    def _draw(self) -> tuple[Any, tuple[float, float]]:
        """The next subgraph, stamped, and the (wall, CPU) seconds its drawing took."""
        sequence = self._cursor.reserve()  # before drawing: a crash leaves a gap, not a repeat
        return self._draw_seeded(sequence, self._seed(sequence))

    def _draw_seeded(self, sequence: int, seed: int) -> tuple[Any, tuple[float, float]]:
        """The subgraph (or, with an induction, its node set) of ``sequence``, stamped, and what drawing took."""
        t0, c0 = time.perf_counter(), time.thread_time()
        if self._induction is not None:
            node_ids = self._sampler.sample_nodes(seed, **self._chain_step(sequence))
            took = (time.perf_counter() - t0, time.thread_time() - c0)
            return SubgraphNodes(node_ids, self._induction, job_id=self._job_id, worker=self._worker,
                                 sequence=sequence, seed=seed), took
        subgraph = self._sampler.sample(seed, **self._chain_step(sequence))
        took = (time.perf_counter() - t0, time.thread_time() - c0)
        return replace(subgraph, job_id=self._job_id, worker=self._worker, sequence=sequence, seed=seed), took

    def _deliver(self, subgraph: Any, took: tuple[float, float], stop: threading.Event, *,
                 sent: bool = False) -> bool:
        """Push (or, with ``sent``, settle the put_nowait of) and count one subgraph; False when stopped
        while waiting for room."""
        waited = self._push(subgraph, stop, sent)
        with self._lock:  # one step: a wait in progress becomes a finished one
            if waited is not None:
                # A node set's edges are unknown until a trainer induces it: counted as none.
                self._counters.observe(subgraph.num_nodes, getattr(subgraph, "num_edges", 0), took[0], waited,
                                       took[1])
            elif self._waiting_since is not None:  # stopped while waiting: the wait still happened
                self._counters.pool_wait_seconds += time.perf_counter() - self._waiting_since
            self._waiting_since = None
        return waited is not None

    def _push_loop(self, handoff: queue.Queue, stop: threading.Event, done: threading.Event) -> None:
        if self._threads_cpu is not None:
            self._threads_cpu.enter()
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
        finally:
            if self._threads_cpu is not None:
                self._threads_cpu.leave()

    def _push(self, subgraph: Any, stop: threading.Event, sent: bool = False) -> float | None:
        """Push, waiting while the pool is full; the seconds waited, or None when stopped first.

        With ``sent`` the subgraph went out with ``put_nowait``: settle that put instead.
        """
        def attempt(timeout: float) -> None:
            if sent:
                self._pool.settle(timeout=timeout)
            else:
                self._pool.put(subgraph, timeout=timeout)

        try:
            attempt(0)
            return 0.0
        except SaintpipeTimeout:
            pass
        t0 = time.perf_counter()
        with self._lock:
            self._waiting_since = t0
        while not stop.is_set():
            try:
                attempt(self._push_poll_s)
                return time.perf_counter() - t0
            except SaintpipeTimeout:
                continue
        if sent and self._pool.abandon() is not None:  # Redis took it after all as the stop came
            return time.perf_counter() - t0
        return None
