"""``saintpipe bench features``: gather throughput of the feature service vs. the in-process numpy gather.

Per feature width, shard servers run as subprocesses and :class:`FeatureClient` s gather random rows over
gRPC (float32 and float16) and through shared memory; ``Dataset.gather_features`` on the same ids and files is
the baseline. Also decodes one answer chunk by the hand-written reader and the generated class
(docs/explanation/decisions.md quotes those rows). Method and targets: docs/benchmarks/features.md.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from saintpipe.core.netns import VethHost
    from saintpipe.services.feature_shard.security import ClientSecurity


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer, seed
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser(
        "features", help="feature-service gather throughput vs. in-process numpy",
        description="Gather random rows from feature shards served by real subprocesses, and in the same run "
        "from the same memory-mapped files in-process (the baseline): rows/s, MB/s, p50/p99 latency, ratio. "
        "Also decodes one answer chunk per width by the hand-written reader and by the generated class.",
    )
    parser.add_argument("--dims", default="50,500,602",
                        help="comma-separated feature widths (default 50,500,602)")
    parser.add_argument("--rows", type=integer(1, 2**31 - 1), default=8000, help="rows per gather (default 8000)")
    parser.add_argument("--nodes", type=integer(1, 2**31 - 1), default=50_000,
                        help="nodes in each generated dataset (default 50000)")
    parser.add_argument("--shards", type=integer(1, 256), default=2, help="shard servers, 1 to 256 (default 2)")
    parser.add_argument("--repeats", type=integer(2, 1_000_000), default=30,
                        help="timed gathers per configuration, at least 2 (default 30)")
    parser.add_argument("--no-fp16", action="store_true", help="skip the float16-transfer rows")
    parser.add_argument("--in-process", action="store_true",
                        help="run the shard servers as threads of this process instead of subprocesses")
    parser.add_argument(
        "--cross-host", choices=["none", "veth"], default="none",
        help="veth: also run the shards on a second network host (a namespace joined by a veth pair; needs root "
        "and iproute2) and report its rows ('veth ...') beside the loopback ones",
    )
    parser.add_argument("--seed", type=seed(), default=0)
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    from saintpipe.core.errors import InvalidArgument
    from saintpipe.core.report import emit_report

    try:
        dims = [int(d) for d in args.dims.split(",") if d.strip()]
    except ValueError:
        raise InvalidArgument(f"--dims {args.dims!r}: expected comma-separated integers") from None
    if not dims or min(dims) < 1:  # the other flags' types keep them in range
        raise InvalidArgument("--dims, --rows, --shards must be >= 1 and --repeats >= 2")
    if args.rows > args.nodes:
        raise InvalidArgument(f"--rows {args.rows} exceeds --nodes {args.nodes} (rows are distinct)")
    skipped = None
    if args.cross_host == "veth":
        from saintpipe.core.netns import netns_unavailable

        if args.in_process:
            raise InvalidArgument("--cross-host veth runs the servers as subprocesses: drop --in-process")
        skipped = netns_unavailable()
        if skipped:
            log.warning("no veth rows: %s", skipped)
            args.cross_host = "none"
    log.info("benchmarking dims %s", dims)
    rows, summary, ratios, decode_ratios = [], {}, {}, {}
    target_path = SHM
    with tempfile.TemporaryDirectory(prefix="saintpipe-bench-features-") as tmp:
        for dim in dims:
            dim_rows, decode_rows = _bench_dim(Path(tmp) / f"dim{dim}", dim, args)
            rows.extend(dim_rows)
            rows.extend(decode_rows)
            # Chunk decode speed of the hand-written reader over the generated class's (saintpipe/core/protowire.py).
            hand, generated = decode_rows[0]["p50_ms"], decode_rows[1]["p50_ms"]
            decode_ratios[f"ratio_decode_dim{dim}_hand_to_generated"] = generated / hand
            by_path = {row["path"]: row for row in dim_rows}
            if SHM not in by_path:
                target_path = BYTES
            for path, key in ((BYTES, "bytes"), (GRPC, "grpc"), (SHM, "shm"), (FP16, "fp16")):
                for prefix in ("", "veth "):
                    if prefix + path in by_path:
                        row = by_path[prefix + path]
                        name = f"ratio_dim{dim}_{prefix.strip() + '_' if prefix else ''}{key}"
                        summary[name] = row["ratio"]
                        summary[name + "_range"] = [row["ratio_min"], row["ratio_max"]]
    for dim in dims:
        ratios[dim] = summary[f"ratio_dim{dim}_{'shm' if target_path == SHM else 'bytes'}"]
        summary[f"ratio_dim{dim}"] = ratios[dim]
    summary["target_path"] = target_path
    if 500 in ratios:
        summary["target_ratio_dim500"] = 0.5
        summary["target_met"] = ratios[500] >= 0.5
    if "ratio_dim500_bytes" in summary:  # the cross-host targets (issue: features across hosts)
        summary["target_ratio_dim500_bytes"] = 0.6
        summary["target_ratio_dim500_fp16"] = 0.7
    if skipped:
        summary["veth_skipped"] = skipped
    summary.update(decode_ratios)
    params = {
        "rows": args.rows, "nodes": args.nodes, "shards": args.shards, "repeats": args.repeats,
        "servers": "in-process threads" if args.in_process else "subprocesses", "cross_host": args.cross_host,
        "warmup_rounds": WARMUP,
    }
    emit_report("features", rows, params=params, summary=summary, as_json=args.json,
                columns=["dim", "path", "rows_per_s", "MB_per_s", "p50_ms", "iqr_pct", "p99_ms", "cpu_ms",
                         "wait_ms", "wire_MB", "shm_MB", "ratio"])
    return 0


BASELINE = "numpy mmap (baseline)"
DECODE_HAND = "decode chunk: hand reader"  # feature_shard.wire.decode_chunk (saintpipe.core.protowire)
DECODE_GENERATED = "decode chunk: generated class"  # GatherChunk.FromString + np.frombuffer of its rows
BYTES = "service bytes"  # float32 rows on the bulk data plane (the default across hosts): the cross-host figure
GRPC = "service grpc"  # float32 rows in gRPC messages (bulk="off", or a shard started with --no-bulk)
SHM = "service shm"  # float32 rows written into the client's /dev/shm region: same host only
FP16 = "service fp16"  # float16 rows on the bulk data plane
WARMUP = 3  # discarded rounds


def _bench_dim(directory, dim: int, args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """The rows of the gather paths and the rows of the two chunk decoders, for feature width ``dim``."""
    import numpy as np
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import open_dataset, write_dataset
    from saintpipe.services.feature_shard.client import FeatureClient
    from saintpipe.core.bars import ProgressBar

    from saintpipe.core.errors import SaintpipeError
    from saintpipe.core.rounds import round_order, summarize

    rng = np.random.default_rng(args.seed)
    arrays = generate_demo(num_nodes=args.nodes, feature_dim=1, seed=args.seed)
    arrays["features"] = rng.standard_normal((args.nodes, dim), dtype=np.float32)
    write_dataset(directory, num_shards=args.shards, **arrays)
    del arrays
    dataset = open_dataset(directory)
    id_sets = [rng.choice(args.nodes, size=args.rows, replace=False) for _ in range(args.repeats + WARMUP)]

    with contextlib.ExitStack() as stack:
        links = {"": stack.enter_context(_servers(directory, args.shards, args.in_process))}
        if args.cross_host == "veth":
            links["veth "] = stack.enter_context(_servers(directory, args.shards, False, veth=True))
        clients: dict[str, FeatureClient] = {}

        def close_clients() -> None:
            for c in clients.values():
                c.close()

        stack.callback(close_clients)
        for prefix, servers in links.items():
            addresses, security = servers.addresses, servers.security

            def client(**kwargs) -> FeatureClient:
                return FeatureClient(addresses, deadline=60.0, security=security, **kwargs)

            clients[prefix + BYTES] = client(shared_memory="off")
            clients[prefix + GRPC] = client(shared_memory="off", bulk="off")
            if not prefix:  # shared memory is a same-host path: a namespace shares /dev/shm, a real host does not
                clients[SHM] = client(shared_memory="auto")
                if not clients[SHM].shared_memory_active:
                    log.warning("the shard servers do not see this process's /dev/shm: no shared-memory row")
                    clients.pop(SHM).close()
            if not args.no_fp16:
                clients[prefix + FP16] = client(transfer_dtype="float16", shared_memory="off")
        meter = _Meter([pid for servers in links.values() for pid in servers.pids])
        reference = dataset.gather_features(id_sets[0])
        for name, checked in clients.items():
            expected = reference if "fp16" not in name else reference.astype(np.float16).astype(np.float32)
            if not np.array_equal(checked.gather(id_sets[0]), expected):
                raise SaintpipeError(f"benchmark self-check failed: {name} rows differ from the dataset")
        paths = [BASELINE, *clients]
        wall: dict[str, list[float]] = {name: [] for name in paths}
        cpu: dict[str, list[float]] = {name: [] for name in paths}
        waited: dict[str, list[float]] = {name: [] for name in paths}
        wire: dict[str, list[float]] = {name: [] for name in clients}
        shared: dict[str, list[float]] = {name: [] for name in clients}
        for i, ids in enumerate(ProgressBar(id_sets, desc=f"dim {dim}", leave=False, disable=args.json)):
            # Round by round, every path on the same ids, in an order that rotates so that none always goes
            # first; the first WARMUP rounds are discarded (connections, page cache, allocator).
            for name in round_order(paths, i):
                c = clients.get(name)
                before = c.stats() if c else {}
                took, spent, wait = meter.measure((lambda ids=ids: dataset.gather_features(ids)) if c is None
                                                  else (lambda c=c, ids=ids: c.gather(ids)))
                if i < WARMUP:
                    continue
                wall[name].append(took)
                cpu[name].append(spent)
                waited[name].append(wait)
                if c is not None:
                    after = c.stats()
                    wire[name].append(after["bytes_received"] - before["bytes_received"])
                    shared[name].append(after["shm_bytes"] - before["shm_bytes"])

    mb = args.rows * dim * 4 / 1e6  # float32 rows delivered per gather
    base = np.array(wall[BASELINE])
    out = []
    for name in paths:
        t = np.array(wall[name])
        times = summarize(t.tolist())
        # Paired per round (same ids, same moment): far steadier than a ratio of medians on a shared machine.
        per_round = summarize((base / t).tolist())
        out.append({
            "dim": dim, "path": name, "rows_per_s": args.rows / times.median,
            "MB_per_s": mb / times.median, "p50_ms": times.median * 1e3, "iqr_pct": times.iqr_pct,
            "p99_ms": float(np.percentile(t, 99)) * 1e3, "cpu_ms": float(np.mean(cpu[name])) * 1e3,
            "wait_ms": float(np.mean(waited[name])) * 1e3,
            "wire_MB": float(np.median(wire[name])) / 1e6 if name in wire else 0.0,
            "shm_MB": float(np.median(shared[name])) / 1e6 if name in shared else 0.0,
            "ratio": per_round.median, "ratio_min": per_round.min, "ratio_max": per_round.max,
        })
    return out, _bench_decode(dataset.gather_features(id_sets[0][: -(-args.rows // args.shards)]), dim)


def _bench_decode(rows, dim: int, rounds: int = 200) -> list[dict]:
    """Decode one answer chunk of the bytes path (a shard's share of a gather, float32, as the server
    frames it) by the hand-written reader and by the generated class, interleaved: is the reader needed?"""
    import numpy as np
    from saintpipe.services.feature_shard.wire import allocate_chunk, decode_chunk

    from saintpipe.core.errors import SaintpipeError
    from saintpipe.protos import feature_shard_pb2 as pb

    message, view = allocate_chunk(0, rows.shape[0], dim, np.dtype(np.float32))
    view[...] = rows
    del view

    def generated():
        chunk = pb.GatherChunk.FromString(message)
        return chunk.offset, np.frombuffer(chunk.rows, dtype=chunk.dtype).reshape(chunk.shape)

    paths = {DECODE_HAND: lambda: decode_chunk(message), DECODE_GENERATED: generated}
    for name, decode in paths.items():
        if not np.array_equal(decode()[1], rows):
            raise SaintpipeError(f"benchmark self-check failed: {name} decoded other rows")
    took: dict[str, list[float]] = {name: [] for name in paths}
    for i in range(rounds + 5):
        for name, decode in paths.items():
            began = time.perf_counter()
            decode()
            if i >= 5:
                took[name].append(time.perf_counter() - began)
    out = []
    for name, times in took.items():
        median = float(np.median(times))
        out.append({
            "dim": dim, "path": name, "rows_per_s": rows.shape[0] / median,
            "MB_per_s": rows.nbytes / 1e6 / median, "p50_ms": median * 1e3,
            "p99_ms": float(np.percentile(times, 99)) * 1e3, "wire_MB": len(message) / 1e6,
        })
    return out


class _Meter:
    """Wall time, CPU time and run-queue wait of one call.

    CPU is summed over this process and the server processes; other processes' CPU times tick at 10 ms, but
    per-call deltas are unbiased, so their mean is fair. The wait is the time the threads of all these
    processes spent ready to run but waiting for a CPU, summed over threads (Linux
    ``/proc/PID/task/TID/schedstat``; 0 where unavailable): near zero on a quiet machine; large values mean
    other jobs held the CPUs and the wall times are inflated by the load, most for the path with the most
    hand-offs between threads.
    """

    def __init__(self, pids: list[int]) -> None:
        import psutil

        self._pids = [os.getpid(), *pids]
        self._procs = [psutil.Process(pid) for pid in pids]

    def _cpu(self) -> float:
        return time.process_time() + sum(sum(p.cpu_times()[:2]) for p in self._procs)

    def _wait(self) -> float:
        total = 0
        for pid in self._pids:
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                return 0.0
            for tid in tasks:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        total += int(f.read().split()[1])
                except (OSError, IndexError, ValueError):
                    pass  # a thread that ended meanwhile
        return total / 1e9

    def measure(self, fn) -> tuple[float, float, float]:
        wait0 = self._wait()
        cpu0 = self._cpu()
        began = time.perf_counter()
        fn()
        took = time.perf_counter() - began
        spent = self._cpu() - cpu0
        return took, spent, self._wait() - wait0


class _servers:
    """Shard servers for the benchmark: subprocesses (default) or in-process threads."""

    def __init__(self, directory, num_shards: int, in_process: bool, veth: bool = False) -> None:
        self._directory, self._num_shards, self._in_process, self._veth = directory, num_shards, in_process, veth
        self.pids: list[int] = []  # server processes (none when in-process)
        self.security: ClientSecurity | None = None  # what clients need to be let in (subprocesses require a token, as deployed)
        self.addresses: list[list[str]] = []
        self._host: VethHost | None = None

    def __enter__(self) -> "_servers":
        if self._in_process:
            from saintpipe.services.feature_shard.server import create_server

            self._servers = [create_server(self._directory, k, bulk_port=0) for k in range(self._num_shards)]
            self.addresses = [[f"127.0.0.1:{port}"] for _, port in self._servers]
            return self
        from saintpipe.services.feature_shard.launch import LocalShards

        host = "127.0.0.1"
        prefix: Sequence[str] = ()
        if self._veth:  # the servers on a second network host: a namespace joined to this one by a veth pair
            from saintpipe.core.netns import VethHost

            veth = self._host = VethHost(prefix="spf").__enter__()
            host, prefix = veth.address, veth.command([])
        try:
            # --no-shared-memory: the bytes rows must measure the network even where /dev/shm is shared.
            self._local = LocalShards(self._directory, self._num_shards, host=host, command_prefix=prefix,
                                      extra_args=["--no-shared-memory"] if self._veth else [])
        except BaseException:
            if self._host is not None:
                self._host.close()
            raise
        self.security = self._local.client_security()
        self.pids = [p.process.pid for replicas in self._local.processes for p in replicas]
        self.addresses = self._local.addresses
        return self

    def __exit__(self, *exc) -> None:
        if self._in_process:
            from saintpipe.services.feature_shard.server import stop_server

            for server, _ in self._servers:
                stop_server(server, 1.0)
        else:
            self._local.stop()
            if self._host is not None:
                self._host.close()
