"""One sampler worker: a Ray actor pinned to one core that keeps the job's pool full.

Callers use :class:`SamplerWorker`, a thin facade; the actor class itself is
private (the pattern of ``ray.util.queue``). The actor memory-maps the
dataset's topology (so N workers on a host share one copy in the page cache),
or its training graph (``[samplers] graph = "train"``: stored with the dataset,
or, where it could not be stored, one copy in Ray's object store per node),
builds its sampler once, then produces (:mod:`production`): reserve a sequence
number, draw the subgraph with that number's seed, stamp it with (job,
worker, sequence, seed), push it to the pool (waiting while the pool is
full), count.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import ray

from saintpipe.services.sampler_service.counters import WorkerCounters

if TYPE_CHECKING:
    from saintpipe.services.pool.pool import SubgraphPool
    from saintpipe.services.sampler.kernels.oriented import Orientation
    from saintpipe.services.sampler_service.production import Producer
    from saintpipe.services.sampler_service.sequence import SequenceCursor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, as plain values (travels to the actor by value; the graph does not)."""

    data: str
    job_seed: int
    sampler: dict[str, Any]
    pool: dict[str, Any]
    push_poll_s: float
    graph: str = "full"  # the graph sampled: "full" or "train" (resolved, never "auto")
    # "train" kept in memory (the dataset directory is read-only): an object-store reference to
    # (indptr, indices, nodes); None: the training graph is stored with the dataset.
    train_graph: Any = None
    per_process: int = 1  # workers that share one process ([samplers] workers_per_process)


@dataclass(frozen=True)
class WorkerInfo:
    """Where a worker incarnation runs."""

    worker: int
    pid: int
    core: int
    shared_core: bool
    affinity: tuple[int, ...]
    hostname: str
    node_id: str
    next_sequence: int


def build_sampler(config, graph, normalization=None, chain: int = 0, orientation=None):
    """The configured sampler over the graph's memory-mapped topology (no copy of the graph).

    ``graph``: a :class:`~saintpipe.services.dataset.sample_graph.SampleGraph`, or an opened dataset (its full
    graph). On the training graph the sampler maps its node sets to global ids.
    ``chain``: the worker's dependent chain (``kappa > 1``, :func:`~saintpipe.services.sampler.parallel.chain_key`).
    ``orientation``: the graph's oriented lists (:func:`~saintpipe.services.sampler.kernels.oriented.orient_graph`)
    when built already; None: the sampler builds them if ``config.induction`` asks for them.
    """
    from saintpipe.services.dataset.sample_graph import as_sample_graph
    from saintpipe.services.sampler.sampler import make_sampler

    graph = as_sample_graph(graph)
    # The dataset store validated the CSR when it wrote it (the training graph's is derived from it, or checked
    # against its checksums); an O(E) re-check per worker start buys nothing.
    return make_sampler(config, graph.indptr, graph.indices, normalization=normalization,
                        train_nodes=graph.train_nodes, check_graph=False, chain=chain, node_map=graph.nodes,
                        orientation=orientation)


def induction_for(graph, normalization=None):
    """What a trainer needs to induce this worker's node sets again (pool wire ``nodes``): the dataset graph's
    size (which the ids index), the normalization's key and settings (its key names the training graph when
    it was made there), the training split's digest (``build_sampler`` restricts the loss weights to it)."""
    from saintpipe.core.subgraph import Induction
    from saintpipe.services.dataset.normalization import store_key
    from saintpipe.services.dataset.sample_graph import as_sample_graph

    graph = as_sample_graph(graph)
    return Induction(
        graph_nodes=graph.dataset_nodes, graph_edges=graph.dataset_edges,
        normalization=(store_key(normalization.config_key, normalization.method, graph.kind)
                       if normalization is not None else ""),
        norm_subgraphs=int(normalization.num_subgraphs) if normalization is not None else 0,
        norm_seed=int(normalization.seed) if normalization is not None else 0,
        train_nodes=graph.train_digest,
    )


def open_worker_graph(spec: WorkerSpec):
    """The :class:`~saintpipe.services.dataset.sample_graph.SampleGraph` a worker samples, memory-mapped."""
    from saintpipe.core.errors import DatasetError
    from saintpipe.services.dataset.sample_graph import full_graph, training_graph
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.services.dataset.train_graph import TrainGraph, load_train_graph

    dataset = open_dataset(spec.data)  # memory maps: workers on a host share the page cache
    if spec.graph == "full":
        return full_graph(dataset)
    if spec.train_graph is not None:
        indptr, indices, nodes = ray.get(spec.train_graph)  # zero-copy views of the node's object store
        return training_graph(dataset, TrainGraph(indptr=indptr, indices=indices, nodes=nodes))
    # The supervisor checked its checksums just before starting the workers.
    stored = load_train_graph(dataset.path, dataset.manifest, checksums=False)
    if stored is None:
        raise DatasetError(f"{dataset.path}: holds no training graph (train_graph/), which the supervisor stored")
    return training_graph(dataset, stored)


class _Member:
    """One worker of an actor process: its core, its stop flag, its pool connection and its producer."""

    def __init__(self, index: int, claim) -> None:
        self.index = index
        self.claim = claim
        self.stop = threading.Event()
        self.producer: Producer | None = None
        self.pool: SubgraphPool | None = None
        self.cursor: SequenceCursor | None = None


class _SamplerWorkerActor:
    """The process behind one or more :class:`SamplerWorker` facades (``[samplers] workers_per_process``).

    Threaded: each member worker's ``run`` loops on a thread of its own while other calls read counters. The
    sampler kernels release the GIL, so the members draw in parallel, one per core, and share what a process
    costs once (the interpreter, numpy, Numba's compiled kernels, the mapped graph and oriented lists); a
    member adds its sampler's scratch and its pool connection.
    """

    def __init__(self, index: int, spec: WorkerSpec) -> None:
        from saintpipe.core.malloc import tune_malloc
        from saintpipe.services.pool.config import PoolConfig
        from saintpipe.services.sampler.config import parse_sampler_config

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._first = index  # the process's first worker index (named in its logs)
        self._spec = spec
        self._lock = threading.Lock()
        self._members: dict[int, _Member] = {}
        self._limit_numba_threads()
        # Every subgraph allocates megabytes of kernel scratch; with glibc's moving thresholds this threaded
        # actor faulted them in fresh on each call (508 faults and 35 % of its time per subgraph, s18).
        tune_malloc()
        self._config = parse_sampler_config(spec.sampler)
        self._pool_config = PoolConfig.model_validate(spec.pool)
        self._graph = open_worker_graph(spec)
        self._orientation: Orientation | None = None  # the graph's oriented lists: handed in by run/presample, else built once here
        self._available = sorted(os.sched_getaffinity(0))  # the cores Ray allows, before pinning narrows them
        self._member(index)  # the first member's core is claimed and the process pinned at start

    @staticmethod
    def _limit_numba_threads() -> None:
        # One core per worker: intra-sampler threads would only contend for it.
        try:
            import numba

            numba.set_num_threads(1)
        except (ImportError, ValueError):
            pass

    def _member(self, index: int) -> _Member:
        """The member worker ``index``, created (its core claimed) on first use."""
        from saintpipe.services.sampler_service.pinning import claim_member_core, pin_to_core

        with self._lock:
            member = self._members.get(index)
            if member is None:
                # The claim (a flock) is held for the member's life. The process's first worker binds the
                # whole process (Ray's threads too); a further one binds only its threads (run, presample).
                claim = claim_member_core(index, self._available) if self._members else pin_to_core(index)
                member = self._members[index] = _Member(index, claim)
            return member

    def _connect(self, member: _Member) -> tuple[SubgraphPool, SequenceCursor]:
        """The member's pool connection and sequence cursor, made on its first call (both at once)."""
        if member.pool is None or member.cursor is None:
            from saintpipe.services.pool.pool import SubgraphPool
            from saintpipe.services.sampler_service.sequence import SequenceCursor

            member.pool = SubgraphPool.from_config(self._pool_config)
            member.cursor = SequenceCursor(self._pool_config, member.index)
        return member.pool, member.cursor

    # --- calls (each names its member worker) ------------------------------------
    def info(self, index: int) -> WorkerInfo:
        member = self._member(index)
        _, cursor = self._connect(member)
        return WorkerInfo(
            worker=index, pid=os.getpid(), core=member.claim.core, shared_core=member.claim.shared,
            affinity=tuple(sorted(os.sched_getaffinity(0))), hostname=socket.gethostname(),
            node_id=ray.get_runtime_context().get_node_id(), next_sequence=cursor.peek(),
        )

    def counters(self, index: int) -> tuple[int, WorkerCounters]:
        member = self._members.get(index)  # a released member is not claimed again by a late poll
        producer = member.producer if member is not None else None
        return os.getpid(), producer.snapshot() if producer is not None else WorkerCounters()

    def presample(self, index: int, start: int, stop: int, norm_seed: int,
                  orientation=None) -> tuple[np.ndarray, np.ndarray]:
        """Draw pre-sampling subgraphs [start, stop); count how often each node and each edge was sampled."""
        from saintpipe.services.sampler.normalization import count_presamples
        from saintpipe.services.sampler_service.pinning import pin_thread

        pin_thread(self._member(index).claim.core)
        self._take_orientation(orientation)
        return count_presamples(build_sampler(self._config, self._graph, None, orientation=self._oriented()),
                                start, stop, norm_seed)

    def _take_orientation(self, given) -> None:
        """Keep the supervisor's oriented lists: the directory they are stored in (mapped read-only from the
        page cache; when this host cannot read it, the worker builds its own), or a reference per array
        (views of the object store)."""
        with self._lock:
            if given is None or self._orientation is not None:
                return
            from saintpipe.services.sampler.kernels.oriented import Orientation

            if isinstance(given, str):
                from saintpipe.core.errors import DatasetError
                from saintpipe.services.dataset.oriented import read_orientation

                try:  # the supervisor checked the files just now
                    arrays = read_orientation(Path(given), self._graph.num_nodes, self._graph.num_edges,
                                              verify=False)
                except DatasetError as exc:
                    log.warning("sampler worker %d: cannot map the oriented lists (%s): building its own",
                                self._first, exc)
                    return
                if arrays is None:
                    log.warning("sampler worker %d: no oriented lists in %s on this host: building its own",
                                self._first, given)
                    return
                self._orientation = Orientation(*arrays)
                return
            self._orientation = Orientation(*ray.get(list(given)))

    def _oriented(self):
        """The graph's oriented lists: the supervisor's, or built here once (every sampler of this process)."""
        with self._lock:
            if self._orientation is None and getattr(self._config, "induction", "") == "oriented":
                from saintpipe.services.sampler.kernels.oriented import orient_graph

                self._orientation = orient_graph(self._graph.indptr, self._graph.indices)
            return self._orientation

    def run(self, index: int, normalization=None, wire: str | None = None, orientation=None) -> int:
        """Produce as worker ``index`` until :meth:`stop`; return the number of subgraphs pushed by this call.

        ``wire`` overrides the pool's (``"full"`` when the supervisor found the normalization unstored, so
        that trainers could not induce node sets).
        """
        from saintpipe.services.sampler_service.pinning import pin_thread
        from saintpipe.services.sampler_service.production import Producer

        member = self._member(index)
        # No clearing of the stop flag here: a stop() that overtook this call (threaded actor) must still hold.
        pin_thread(member.claim.core)  # this call's thread draws on the member's core
        self._take_orientation(orientation)
        pool, cursor = self._connect(member)
        if member.producer is None:  # once per incarnation (the sampler's tables are built here)
            from saintpipe.services.sampler.parallel import chain_key

            sampler = build_sampler(self._config, self._graph, normalization,
                                    chain=chain_key(self._spec.job_seed, index), orientation=self._oriented())
            nodes = (wire or pool.wire) == "nodes"
            member.producer = Producer(sampler, pool, cursor, job_id=self._pool_config.job_id,
                                       worker=index, job_seed=self._spec.job_seed,
                                       push_poll_s=self._spec.push_poll_s,
                                       induction=induction_for(self._graph, normalization) if nodes else None,
                                       own_threads_cpu=self._spec.per_process > 1)
        log.info("sampler worker %d (pid %d) producing on core %d from sequence %d (%s)", index, os.getpid(),
                 member.claim.core, cursor.peek(),
                 "node sets" if member.producer.sends_nodes else "whole subgraphs")
        return member.producer.run(member.stop)

    def stop(self, index: int) -> None:
        self._member(index).stop.set()  # also before its run started: the run then returns at once

    def release_core(self, index: int) -> None:
        """Give up the member's core claim now (before a kill), so a worker started next can take the core."""
        with self._lock:
            member = self._members.pop(index, None)
        if member is not None:
            member.stop.set()
            member.claim.release()
            if member.pool is not None:
                member.pool.close()


class SamplerProcess:
    """Facade over one sampler actor process, shared by the :class:`SamplerWorker` facades it hosts.

    Args:
        first: the index of its first worker (its core slot; the process starts pinned to that core).
        spec: what to sample and where to push.
        size: how many workers it may host (Ray reserves ``size * num_cpus`` CPUs for it).
        num_cpus: Ray CPUs per worker.
        max_restarts: how often Ray restarts the process after it dies.
    """

    def __init__(self, first: int, spec: WorkerSpec, *, size: int = 1, num_cpus: float = 1.0,
                 max_restarts: int = 3) -> None:
        self.first = first
        self.members: set[int] = set()
        self.killed = False
        # max_task_retries=0: a run() interrupted by a crash fails, so the supervisor sees every restart.
        # SPREAD: the processes of a job go to as many Ray nodes as have CPUs for them, so losing one node
        # costs only its share; Ray restarts the lost ones where CPUs are left.
        # Any: ray's annotations give an actor's methods no `.remote`.
        self.actor: Any = ray.remote(_SamplerWorkerActor).options(
            num_cpus=num_cpus * size, max_restarts=max_restarts, max_task_retries=0,
            max_concurrency=4 + 2 * size, scheduling_strategy="SPREAD",
        ).remote(first, spec)

    def kill(self) -> None:
        """End the process for good (no restart), whatever it still hosts."""
        self.killed = True
        ray.kill(self.actor, no_restart=True)


class SamplerWorker:
    """Facade over one sampler worker: a member of a :class:`SamplerProcess` actor.

    Args:
        index: the worker index (its core slot and its random stream).
        process: the process to run in (shared with other workers; it knows what to sample and where to push).
        orientation: the graph's oriented lists (:func:`~saintpipe.services.sampler.kernels.oriented.orient_graph`):
            the directory they are stored in (``services/dataset/oriented.py``), or object-store
            references to their arrays, handed to every ``run`` and
            ``presample`` call (not to the constructor: an object in the constructor's arguments must outlive
            every restart, and Ray logs an error line for each such actor); None: the worker builds its own.

    Example:
        >>> worker = SamplerWorker(0, SamplerProcess(0, spec))  # doctest: +SKIP
        >>> done = worker.run_async()        # produces until worker.stop()
    """

    def __init__(self, index: int, process: SamplerProcess, *,
                 orientation: "str | list[ray.ObjectRef] | None" = None) -> None:
        self.index = index
        self._orientation = orientation
        self.process = process
        self.process.members.add(index)
        self._actor = self.process.actor

    def info(self, timeout: float = 60.0) -> WorkerInfo:
        """Where the worker runs; waits for it to start, or to come back while Ray restarts it.

        Raises:
            GetTimeoutError: it did not answer within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                return ray.get(self.info_async(), timeout=max(0.0, deadline - time.monotonic()))
            except ray.exceptions.ActorUnavailableError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def info_async(self) -> ray.ObjectRef:
        """Like :meth:`info` without waiting for a restart, as a reference."""
        return self._actor.info.remote(self.index)

    def counters_async(self) -> ray.ObjectRef:
        """``(pid, counts)`` of the current incarnation (counts start at zero in each new process), as a
        reference."""
        return self._actor.counters.remote(self.index)

    def run_async(self, normalization: "ray.ObjectRef | None" = None, wire: str | None = None) -> ray.ObjectRef:
        """Start producing; the reference resolves when the worker stops (or fails if it dies).

        Args:
            normalization: an object-store reference to the job's ``Normalization``
                (shared zero-copy by the workers of a node), or None for plain weights.
            wire: overrides the pool config's ``wire`` (None: the config's, resolved by the worker's pool).
        """
        return self._actor.run.remote(self.index, normalization, wire, self._orientation)

    def presample_async(self, start: int, stop: int, norm_seed: int) -> ray.ObjectRef:
        """Pre-sample [start, stop); resolves to (node_counts, edge_counts)."""
        return self._actor.presample.remote(self.index, start, stop, norm_seed, self._orientation)

    def stop_async(self) -> ray.ObjectRef:
        """Ask the worker to finish its current subgraph and return from run."""
        return self._actor.stop.remote(self.index)

    def release_core_async(self) -> ray.ObjectRef:
        """Ask the worker to release its core claim (call after it stopped, before :meth:`kill`)."""
        return self._actor.release_core.remote(self.index)

    def kill(self, whole_process: bool = False) -> None:
        """End the worker for good: its process too when no other worker lives there, or with
        ``whole_process`` in any case, with every worker it hosts (its actor is dead for good). No restart."""
        self.process.members.discard(self.index)
        if (whole_process or not self.process.members) and not self.process.killed:
            self.process.kill()
