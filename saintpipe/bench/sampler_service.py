"""``saintpipe bench sampler-service``: how fast the sampler service fills the pool, against the bare kernel.

The same kernel looping in this process on one pinned core (the plain loop) alternates with windows of the
service filling a real pool (1 worker, one per core, bytes in shared memory or in Redis, whole subgraphs or
node sets), so that the machine's drift cancels in each ratio; a drain thread stands in for the trainers.
The method, the columns and the targets: docs/benchmarks/sampler-service.md.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator
from typing import Any, Self, cast

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer, real, seed
    from saintpipe.core.report import add_json_flag

    # "samplers": the name it had before, kept for the scripts that use it.
    parser = sub.add_parser("sampler-service", aliases=["samplers"],
                            help="pool fill rate of the sampler service, 1 worker and 1 per core, vs the kernel",
                            description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--data", type=Path, help="dataset directory (default: the Kronecker graph of --scale)")
    parser.add_argument("--scale", type=integer(1, 30), default=18, help="Kronecker scale when no --data (default 18)")
    parser.add_argument("--degree", type=real(0, 2**30, min_open=True), default=16.0,
                        help="Kronecker mean degree (default 16)")
    parser.add_argument("--sampler", dest="sampler_kind", default="random_walk", help="sampler kind")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a sampler parameter (default: the paper's, random walk r=3000 h=2)")
    parser.add_argument("--workers", type=integer(1, 4096), default=None,
                        help="workers of the many-worker run (default: one per available core)")
    parser.add_argument("--workers-per-process", type=integer(1, 256), default=1,
                        help="workers that share one process, each on a thread (default 1: a process each)")
    parser.add_argument("--seconds", type=real(0, 3600, min_open=True), default=1.0,
                        help="length of each plain-loop and service window (default 1)")
    parser.add_argument("--windows", type=integer(1, 10_000), default=10,
                        help="service windows per configuration, each between two plain-loop windows (default 10)")
    parser.add_argument("--pool-memory-mb", type=real(0, 2**20, min_open=True), default=256.0,
                        help="Redis memory the pooled subgraphs may take: caps the pool's capacity (default 256)")
    parser.add_argument("--norm-subgraphs", type=integer(1, 10_000_000), default=50,
                        help="pre-sampled subgraphs (default 50)")
    parser.add_argument("--transport", default="auto", choices=["auto", "redis", "shared_memory"],
                        help="the pool's transport (default auto: shared memory, the Redis being local)")
    parser.add_argument("--wire", default="auto", choices=["auto", "full", "nodes"],
                        help="what the workers put (default auto: node sets when the bytes go through Redis)")
    parser.add_argument("--cross-host", default="none", choices=["none", "veth"],
                        help="veth: also run the Redis runs with Redis in another network namespace, over a veth "
                             "pair (needs root and iproute2; skipped with the reason otherwise)")
    parser.add_argument("--seed", type=seed(), default=0, help="graph and job seed")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


@contextlib.contextmanager
def _pinned() -> Iterator[None]:
    """This thread (only) on the first core it may use, for the block."""
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved)


def plain_loop(sampler, seconds: float, job_seed: int) -> dict:
    """Sample back to back on one pinned core for ``seconds``: the kernel alone, no service around it."""
    from saintpipe.services.sampler.parallel import subgraph_seed, subgraph_seeds

    with _pinned():
        sampler.sample(subgraph_seed(job_seed, 0, 2**32))  # warm-up: compiled code, touched pages
        count, start, cpu = 0, time.perf_counter(), time.thread_time()
        seeds: list[int] = []
        while True:
            if count % 16 == 0:  # seeds a block at a time, as the workers derive them
                seeds = subgraph_seeds(job_seed, 0, count, 16)
            sampler.sample(seeds[count % 16])
            count += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        cpu = time.thread_time() - cpu
    return {"subgraphs": count, "seconds": elapsed, "sample_s": elapsed, "cpu_s": cpu, "kernel_cpu_s": cpu,
            "pool_wait_s": 0.0}


def wire_figures(sampler: Any, dataset: Any, normalization: Any, job_seed: int, *, count: int = 16,
                 rounds: int = 3) -> dict[str, Any]:
    """Sizes and trainer-side costs of ``count`` subgraphs of ``sampler`` in both wire forms.

    With the pool's ``wire = "nodes"`` a worker sends the node set and the trainer induces it again
    (:class:`saintpipe.minibatch.expand.SubgraphExpander`): the bytes and the sampler's work shrink, the
    trainer's work grows. Both sides are measured on the same subgraphs, pinned to one core as the plain loop
    is, in interleaved rounds after a discarded warm-up round; each expanded subgraph is checked equal to the
    whole one, array for array.

    Returns:
        ``bytes_full``, ``bytes_nodes`` (mean encoded bytes a subgraph), ``decode_full_ms``,
        ``expand_nodes_ms`` (median over ``rounds`` of the mean ms a subgraph) with their lowest and
        highest rounds (``*_range``), ``nodes_encode_ms`` (the worker's encoding of a node set), and
        ``expanded_equal`` (every expanded subgraph equals its whole form).
    """
    from saintpipe.core.subgraph import SubgraphNodes
    from saintpipe.minibatch.expand import SubgraphExpander
    from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph
    from saintpipe.services.pool.codec.compact import decode_entry, encode_nodes
    from saintpipe.services.sampler.parallel import subgraph_seeds
    from saintpipe.services.sampler_service.worker import induction_for

    induction = induction_for(dataset, normalization)
    seeds = subgraph_seeds(job_seed, 1, 0, count)  # worker 1's first subgraphs: not the plain loop's
    wholes = [sampler.sample(seed) for seed in seeds]
    full = [encode_subgraph(sg) for sg in wholes]
    node_sets = [SubgraphNodes(sampler.sample_nodes(seed), induction, seed=seed) for seed in seeds]
    nodes = [encode_nodes(ns) for ns in node_sets]
    expander = SubgraphExpander(dataset)
    # Node-set entries (encode_nodes): decode_entry gives SubgraphNodes.
    equal = all(expander(cast(SubgraphNodes, decode_entry(b))).equals(sg) for b, sg in zip(nodes, wholes, strict=True))

    decode_ms, expand_ms, encode_ms = [], [], []
    with _pinned():  # as the plain loop
        for round_ in range(rounds + 1):  # round 0: warm-up (compilation, page cache), discarded
            t0 = time.perf_counter()
            for data in full:
                decode_subgraph(data)
            t1 = time.perf_counter()
            for data in nodes:
                expander(cast(SubgraphNodes, decode_entry(data)))
            t2 = time.perf_counter()
            for ns in node_sets:
                encode_nodes(ns)
            t3 = time.perf_counter()
            if round_:
                decode_ms.append(1000 * (t1 - t0) / count)
                expand_ms.append(1000 * (t2 - t1) / count)
                encode_ms.append(1000 * (t3 - t2) / count)
    return {
        "bytes_full": sum(map(len, full)) / count, "bytes_nodes": sum(map(len, nodes)) / count,
        "decode_full_ms": statistics.median(decode_ms),
        "decode_full_ms_range": [min(decode_ms), max(decode_ms)],
        "expand_nodes_ms": statistics.median(expand_ms),
        "expand_nodes_ms_range": [min(expand_ms), max(expand_ms)],
        "nodes_encode_ms": statistics.median(encode_ms), "expanded_equal": equal,
    }


def _redis_cpu(pid: int | None) -> float:
    import psutil

    if pid is None:
        return 0.0
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


class Drain:
    """A consumer that acknowledges every entry of the job's pool without fetching its bytes.

    It plays the trainers' part in the benchmark at a fraction of their cost: acknowledged entries are
    deleted, so Redis recycles their memory. Entries are taken in batches and acknowledged in one round trip a
    batch (as a trainer's acknowledgement rides with its next get); ``hold`` stills it.
    """

    def __init__(self, url: str, job_id: str) -> None:
        from saintpipe.services.pool.pool import SubgraphPool

        self._pool = SubgraphPool(url, job_id)
        self._stop = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self._thread = threading.Thread(target=self._run, name="bench-drain", daemon=True)

    def hold(self, capacity: int) -> None:
        """Stop taking entries and wait until the pool holds ``capacity``: every worker then waits for room, idle."""
        self._running.clear()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self._pool.stats().held < capacity:
            time.sleep(0.02)
        time.sleep(0.1)  # the last puts settle; a waiting worker polls every 50 ms at most

    def resume(self) -> None:
        self._running.set()

    def _run(self) -> None:
        import redis

        from saintpipe.services.pool.connection import make_client
        from saintpipe.services.pool.keys import GROUP

        client = make_client(self._pool.url)
        try:
            while not self._stop.is_set():
                if not self._running.wait(0.05):
                    continue
                try:
                    read: Any = client.xreadgroup(GROUP, "bench-drain", {self._pool.stream_key: ">"}, count=64, block=50)
                except redis.ResponseError:  # no group yet: the first put creates it
                    time.sleep(0.05)
                    continue
                for _, entries in read or []:
                    for entry_id, _ in entries:
                        self._pool.ack(entry_id.decode(), wait=False)
                if read:
                    # One round trip for the batch, as a trainer's acknowledgement rides with its next get;
                    # the pause lets a few entries gather (the pool holds 8 a worker: none waits).
                    self._pool.flush_acks()
                    time.sleep(0.005)
        finally:
            client.close()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._pool.close()


def interleaved_run(config, workers: int, sampler, windows: int, seconds: float, job_seed: int,
                    redis_pid: int | None) -> tuple[list[dict], list[dict], dict]:
    """Start the service with ``workers`` workers, then alternate plain-loop and service windows.

    Returns ``(plains, services, memory)``: ``windows + 1`` plain-loop windows and
    ``windows`` service windows, service window i lying between plain windows
    i and i + 1; the worker processes' memory after the last window (:func:`worker_memory`).
    """
    from saintpipe.services.pool.pool import SubgraphPool
    from saintpipe.services.sampler_service.pinning import keep_off_cores
    from saintpipe.services.sampler_service.service import SamplerService

    service = SamplerService(config.model_copy(update={"workers": workers}))
    plains: list[dict] = []
    services: list[dict] = []
    with Drain(config.pool.url, config.job) as drain:
        try:
            service.start()
            deadline = time.monotonic() + 300
            while not all(w.counters.subgraphs for w in service.stats().workers):  # warm-up: all have pushed
                service.raise_if_failed()
                if time.monotonic() > deadline:
                    raise RuntimeError("the workers did not start pushing within 300 s")
                time.sleep(0.05)
            if redis_pid is not None:  # the private Redis keeps off the workers' cores while any is spare
                keep_off_cores(redis_pid, {info.core for info in service.worker_info()})
            for window in range(windows + 1):
                drain.hold(config.pool.capacity)
                plains.append(plain_loop(sampler, seconds, job_seed))
                if window < windows:
                    drain.resume()
                    services.append(_service_window(service, seconds, redis_pid))
            memory = worker_memory(service)
        finally:
            service.stop()
    SubgraphPool(cast(str, service.redis_url), config.job).delete_job()  # started: it has its URL
    return plains, services, memory


def worker_memory(service) -> dict:
    """The memory of the service's worker processes, summed over them (each counted once, however many
    workers it hosts): ``processes``, ``pss``, ``anonymous`` (bytes)."""
    from saintpipe.core.memory import process_memory

    pids = sorted({info.pid for info in service.worker_info()})
    per = [process_memory(pid) for pid in pids]
    return {"processes": len(pids), "pss": sum(m["pss"] for m in per), "anonymous": sum(m["anonymous"] for m in per)}


def _service_window(service, seconds: float, redis_pid: int | None) -> dict:
    """Production over ``seconds``, from 0.3 s after the drain resumed (the workers are back at speed)."""
    time.sleep(0.3)
    # Each stats() asks every worker for its counters, a Ray call served on the worker's own core (about
    # 1 ms): only one at each end of the window.
    first, redis0 = service.stats(), _redis_cpu(redis_pid)
    t0 = time.perf_counter()
    time.sleep(seconds)
    last = service.stats()
    elapsed = time.perf_counter() - t0
    redis_s = _redis_cpu(redis_pid) - redis0

    def delta(field: str) -> float:
        return sum(getattr(w.counters, field) for w in last.workers) - sum(
            getattr(w.counters, field) for w in first.workers)

    return {"subgraphs": last.subgraphs - first.subgraphs, "seconds": elapsed,
            "sample_s": delta("sample_seconds_sum"), "cpu_s": delta("cpu_seconds"),
            "kernel_cpu_s": delta("sample_cpu_seconds"), "redis_cpu_s": redis_s,
            "pool_wait_s": delta("pool_wait_seconds")}


def _total(windows: list[dict]) -> dict:
    """One table row for a list of windows: their sums, and per-subgraph figures over the sums."""
    count = sum(w["subgraphs"] for w in windows)
    seconds = sum(w["seconds"] for w in windows)

    def per(field: str) -> float:
        return 1000 * sum(w[field] for w in windows) / max(count, 1)

    row = {"subgraphs": count, "seconds": seconds, "subgraphs_per_s": count / seconds,
           "sample_ms": per("sample_s"), "cpu_ms": per("cpu_s"), "kernel_cpu_ms": per("kernel_cpu_s"),
           "pool_wait_s": sum(w["pool_wait_s"] for w in windows)}
    if "redis_cpu_s" in windows[0]:
        row["redis_cpu_ms"] = per("redis_cpu_s")
    return row


def _versus_plain(plains: list[dict], services: list[dict]) -> dict[str, list[float]]:
    """Each service window against the mean of the plain windows on either side: rate and CPU ratios."""
    rate, cpu = [], []
    for i, window in enumerate(services):
        around = (plains[i], plains[i + 1])
        count = max(window["subgraphs"], 1)
        rate.append((window["subgraphs"] / window["seconds"])
                    / (sum(p["subgraphs"] / p["seconds"] for p in around) / 2))
        cpu.append((sum(p["cpu_s"] / p["subgraphs"] for p in around) / 2) / (window["cpu_s"] / count))
    return {"rate": rate, "cpu": cpu}


@dataclass(frozen=True)
class Run:
    """One service configuration of the benchmark."""

    workers: int
    transport: str  # resolved: redis or shared_memory
    wire: str  # resolved: full or nodes
    veth: bool = False  # Redis in another network namespace, reached over a veth pair

    @property
    def label(self) -> str:
        nodes = ", node sets" if self.wire == "nodes" else ""
        return f"service ({self.transport}{nodes}{' via veth' if self.veth else ''})"


def plan_runs(transport: str, wire: str, workers: int) -> list[Run]:
    """The configurations, in order: the one asked for with 1 worker, whole subgraphs and node sets through
    Redis (each unless it is the one asked for), then the one asked for with ``workers`` workers."""
    main = Run(1, transport, wire)
    runs = [main] + [run for run in (Run(1, "redis", "full"), Run(1, "redis", "nodes")) if run != main]
    if workers > 1:
        runs.append(Run(workers, transport, wire))
    return runs


def _bench(args: argparse.Namespace) -> int:
    import ray

    from saintpipe.core.ray_cluster import connect_ray
    from saintpipe.core.report import emit_report
    from saintpipe.services.dataset.normalization import load_or_estimate
    from saintpipe.core.malloc import tune_malloc
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.services.pool.codec import encode_subgraph
    from saintpipe.services.pool.pool import resolve_transport, resolve_wire
    from saintpipe.services.pool.redis_server import RedisServer
    from saintpipe.services.sampler.parallel import available_cores
    from saintpipe.bench.kernels import kronecker_dataset
    from saintpipe.services.sampler_service.cli import sampler_flags
    from saintpipe.services.sampler_service.config import SamplerServiceConfig
    from saintpipe.services.sampler_service.worker import build_sampler

    cores = len(available_cores())
    workers = args.workers or cores
    args.sampler_config = None
    tune_malloc()  # the workers' malloc settings for the plain loop too, so that the ratios compare kernels
    # The same cache as `saintpipe bench kernels`, so the graph is generated once for both.
    data = args.data if args.data is not None else kronecker_dataset(args.scale, args.degree, args.seed)
    dataset = open_dataset(data)
    with RedisServer(use_env=False) as redis_server:
        # A stored estimator (the pre-sampled reference): node sets need coefficients trainers can read, and the
        # plain loop and the service must weight alike; online coefficients would differ per worker.
        # (pydantic validates the sampler and pool dicts into their models: the ignore below.)
        config = SamplerServiceConfig(data=data, seed=args.seed, sampler=sampler_flags(args),  # type: ignore[arg-type]
                                      norm_subgraphs=args.norm_subgraphs, normalization="reference",
                                      workers_per_process=args.workers_per_process,
                                      pool={"url": redis_server.url,  # type: ignore[arg-type]
                                            "job_id": "bench-samplers", "transport": args.transport,
                                            "wire": args.wire})
        # The in-process estimate, stored with the dataset where the service looks: the service reuses it
        # (and trainers, or the expansion measured here, read it to induce node sets).
        norm = load_or_estimate(dataset, config.sampler, args.norm_subgraphs, seed=config.norm_seed)
        sampler = build_sampler(config.sampler, dataset, norm)
        sg_bytes = len(encode_subgraph(sampler.sample(1)))
        wire = wire_figures(sampler, dataset, norm, args.seed)
        message_bytes = {"full": wire["bytes_full"], "nodes": wire["bytes_nodes"]}
        transport = resolve_transport(args.transport, redis_server.url)
        runs = plan_runs(transport, resolve_wire(args.wire, transport), workers)
        cross_host = _cross_host_plan(args.cross_host)
        if cross_host == "veth":
            runs += [Run(1, "redis", "full", veth=True), Run(1, "redis", "nodes", veth=True)]
        connect_ray("local", num_cpus=max(cores, workers), log_to_driver=False)
        measured: dict[Run, tuple[list[dict], list[dict], dict]] = {}

        def measure(run: Run, url: str, redis_pid: int | None) -> None:
            # Small, so that a paused drain stills the workers within a few subgraphs; node sets come several
            # times faster, and 8 of them would have the workers wait on the drain's pauses between batches.
            per_worker = 32 if run.wire == "nodes" else 8
            capacity = max(1, min(per_worker * run.workers,
                                  int(args.pool_memory_mb * 2**20 / message_bytes[run.wire])))
            pool = config.pool.model_copy(update={"url": url, "transport": run.transport, "wire": run.wire,
                                                  "capacity": capacity})
            measured[run] = interleaved_run(config.model_copy(update={"pool": pool}), run.workers, sampler,
                                            args.windows, args.seconds, args.seed, redis_pid)

        try:
            for run in runs:
                if not run.veth:
                    measure(run, redis_server.url, redis_server.pid)
            if cross_host == "veth":
                from saintpipe.core.netns import VethHost

                with VethHost(prefix="spb") as host, RedisServer(
                        use_env=False, host=host.address, command_prefix=host.command([])) as far:
                    for run in runs:
                        if run.veth:
                            measure(run, far.url, far.pid)
        finally:
            ray.shutdown()
    runs = [run for run in runs if run in measured]
    report = _report(args, runs, measured, wire, workers, csr_bytes=dataset.indptr.nbytes + dataset.indices.nbytes)
    params = {"graph": str(data), "nodes": dataset.num_nodes, "edges": dataset.num_edges,
              "sampler": config.sampler.model_dump(mode="json"), "cores": cores, "workers": workers,
              "workers_per_process": args.workers_per_process,
              "transport": transport, "wire": runs[0].wire, "cross_host": cross_host,
              "seconds": args.seconds, "windows": args.windows,
              "expanded_equal": wire["expanded_equal"],
              "targets": "service(1)/plain >= 0.90, scaling/workers >= 0.85, node sets in Redis/plain >= 0.85"}
    report["summary"]["subgraph size (MB encoded)"] = sg_bytes / 2**20
    emit_report("samplers", report["rows"], params=params, summary=report["summary"], as_json=args.json,
                columns=["run", "workers", "subgraphs", "seconds", "subgraphs_per_s", "sample_ms", "cpu_ms",
                         "kernel_cpu_ms", "redis_cpu_ms", "pool_wait_s"])
    return 0


def _cross_host_plan(mode: str) -> str:
    """``"veth"`` when the cross-host runs can be made, ``"none"``, or ``"skipped: <reason>"`` (printed)."""
    if mode == "none":
        return "none"
    from saintpipe.core.netns import netns_unavailable

    reason = netns_unavailable()
    if reason is None:
        return "veth"
    print(f"cross-host (veth) runs skipped: {reason}", file=sys.stderr, flush=True)
    return f"skipped: {reason}"


def _report(args: argparse.Namespace, runs: list[Run], measured: dict, wire: dict, workers: int, *,
            csr_bytes: int) -> dict:
    """The table rows (a plain-loop row and a service row per run) and the summary."""
    rows, ratios, service_rows = [], {}, {}
    for run in runs:
        plains, services, _ = measured[run]
        label = run.label
        rows += [{"run": f"plain loop, around {label} x{run.workers}", "workers": 1, **_total(plains)},
                 {"run": label, "workers": run.workers, **_total(services)}]
        service_rows[run] = rows[-1]
        ratios[run] = _versus_plain(plains, services)

    def median(values: list[float]) -> float:
        return float(statistics.median(values))

    main = runs[0]
    one = service_rows[main]
    many_run = Run(workers, main.transport, main.wire)
    many = service_rows.get(many_run, one)
    summary = {
        f"service(1) / plain loop, subgraphs/s (median of {args.windows} windows)": median(ratios[main]["rate"]),
        "service(1) / plain loop, subgraphs/s, lowest window": min(ratios[main]["rate"]),
        "service(1) / plain loop, subgraphs/s, highest window": max(ratios[main]["rate"]),
        "service(1) / plain loop, by CPU per subgraph (median)": median(ratios[main]["cpu"]),
        # Both sides from the same window of the same worker: immune to the machine's speed drifting.
        "service(1): kernel CPU / worker CPU, same windows": one["kernel_cpu_ms"] / one["cpu_ms"],
    }
    if many_run in service_rows:
        # Per core, each configuration against its own plain loops (the machine's speed drifts in between).
        summary[f"scaling service({workers}) / service(1), subgraphs/s"] = (
            many["subgraphs_per_s"] / one["subgraphs_per_s"])
        summary["scaling / workers (median window, each against its plain loops)"] = (
            median(ratios[many_run]["rate"]) / median(ratios[main]["rate"]) / workers)
        summary[f"CPU per subgraph, 1 worker / {workers} workers"] = one["cpu_ms"] / many["cpu_ms"]
        # What one more worker costs: its process's private memory, or, sharing a process, its thread's.
        mem_one, mem_many = measured[main][2], measured[many_run][2]
        added = (mem_many["anonymous"] - mem_one["anonymous"]) / (workers - 1)
        summary[f"worker processes for {workers} workers"] = mem_many["processes"]
        summary["worker processes' anonymous memory, 1 worker / all workers (MiB)"] = [
            mem_one["anonymous"] / 2**20, mem_many["anonymous"] / 2**20]
        summary["worker processes' PSS, 1 worker / all workers (MiB)"] = [mem_one["pss"] / 2**20,
                                                                          mem_many["pss"] / 2**20]
        summary["memory added per further worker (anonymous, MiB)"] = added / 2**20
        summary["memory added per further worker / the CSR's bytes"] = added / csr_bytes
    # Redis serves every push on one thread: the fill rate cannot pass this, whatever the workers.
    summary["one Redis thread's ceiling, subgraphs/s"] = 1000 / max(many["redis_cpu_ms"], 1e-9)
    # Through Redis, whole subgraphs (wire full: the key's meaning before node sets existed) and node sets.
    for prefix, veth in (("", False), ("veth: ", True)):
        for what, wire_kind in (("the bytes in Redis", "full"), ("node sets in Redis (wire nodes)", "nodes")):
            run = Run(1, "redis", wire_kind, veth=veth)
            if run not in ratios:
                continue
            name = f"{prefix}service(1) with {what}"
            summary[f"{name} / plain loop, subgraphs/s (median)"] = median(ratios[run]["rate"])
            summary[f"{name} / plain loop, subgraphs/s, lowest and highest window"] = [
                min(ratios[run]["rate"]), max(ratios[run]["rate"])]
            summary[f"{name} / plain loop, by CPU (median)"] = median(ratios[run]["cpu"])
            summary[f"{name}: kernel CPU / worker CPU"] = (
                service_rows[run]["kernel_cpu_ms"] / service_rows[run]["cpu_ms"])
            summary[f"{name}: Redis CPU, ms per subgraph"] = service_rows[run]["redis_cpu_ms"]
    # Where the work went: fewer bytes and less sampling, more work on the trainer.
    summary["bytes per subgraph, whole (wire full)"] = wire["bytes_full"]
    summary["bytes per subgraph, node set (wire nodes)"] = wire["bytes_nodes"]
    summary["node set / whole, bytes"] = wire["bytes_nodes"] / wire["bytes_full"]
    summary["worker: encode a node set, ms per subgraph"] = wire["nodes_encode_ms"]
    summary["trainer: decode a whole subgraph, ms per subgraph (median round)"] = wire["decode_full_ms"]
    summary["trainer: decode and expand a node set, ms per subgraph (median round)"] = wire["expand_nodes_ms"]
    summary["trainer: decode and expand a node set, ms per subgraph, lowest and highest round"] = (
        wire["expand_nodes_ms_range"])
    return {"rows": rows, "summary": summary}
