"""FeatureClient: gathers feature rows from the shard servers, in request order.

A gather deduplicates the ids that the cache does not hold, cuts them by shard
range (each shard's ids are a contiguous slice once sorted), asks the shards
concurrently (one ``GatherUnary`` message per shard when the answer fits the
message limit, a stream of chunks beyond it) and writes every answer straight
into the output array at the positions its ids were requested. Every call carries a deadline
(one budget for the whole gather). UNAVAILABLE answers (a dead or restarting
server) are retried on the shard's other replicas and then, after a backoff,
again, until ``retry_deadline_s`` runs out (a shard restarted on its address
is a pause, not an error); then a :class:`~saintpipe.core.errors.ServiceUnavailable`
names the shard and every address tried (:mod:`saintpipe.services.feature_shard.replicas`).

Same-host shared memory (``shared_memory="auto"``, the default): the client
probes each replica once (:func:`saintpipe.services.feature_shard.shm.probe`); for a
gather, it leases one of its ``/dev/shm`` regions, every shard call names the
region and the byte offset of its rows (the position of its first id in the
sorted unique ids), the servers write the rows there and answer with metadata
only, and one pass copies region -> output in request order (duplicates
included). Replicas that failed the probe answer in bytes, which the client
writes into the region itself. Across hosts every probe fails and gathers take
the bytes path exactly as without shared memory. Every target carries the
region's secret (:mod:`saintpipe.services.feature_shard.shm`): servers write
only into regions this client created.

Security (``security=``, :class:`~saintpipe.services.feature_shard.security.ClientSecurity`):
TLS channels verified against a CA, a client certificate for shards that
require one, and the shared token on every call. A shard that refuses the
token (UNAUTHENTICATED) is a ConfigError at once, never retried.
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from pathlib import Path
from typing import Callable, Sequence, TypeVar, cast

import grpc
import numpy as np

from saintpipe.core.errors import ConfigError, InvalidArgument
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.feature_shard import metrics, ranges, shm
from saintpipe.services.feature_shard.addresses import resolve_shards
from saintpipe.services.feature_shard.bulk_client import BulkChannel
from saintpipe.services.feature_shard.cache import CacheConfig, FeatureCache, top_degree_nodes
from saintpipe.services.feature_shard.config import SHARED_MEMORY_MODES
from saintpipe.core.malloc import tune_malloc
from saintpipe.services.feature_shard.replicas import Budget, Replica, Shard, connect_replica, with_failover
from saintpipe.services.feature_shard.security import ClientSecurity
from saintpipe.services.feature_shard.transports import Bulk, Piece, SharedMemory, Stream, Unary
from saintpipe.services.feature_shard.wire import CHUNK_OVERHEAD, encode_ids

log = logging.getLogger(__name__)

T = TypeVar("T")
TRANSFER_DTYPES = ("float32", "float16")
BULK_MODES = ("auto", "off")


class FeatureClient:
    """Routes gathers to the feature shards; optionally through a trainer-side cache.

    Args:
        shards: per shard (in shard order) the replica addresses ``"host:port"``;
            or a JSON address manifest path ``{"shards": [[...], ...]}``; or a
            ``"a:1,b:2;c:3"`` string (see :mod:`saintpipe.services.feature_shard.addresses`).
        deadline: seconds one gather (or the start-up Info calls) may take while the shards
            answer; a replica that accepts a call but does not answer in time raises SaintpipeTimeout.
        retry_deadline_s: seconds a gather (or the start-up) keeps retrying a shard none of whose
            replicas can be reached (refused, reset: dead or restarting), counted from its start;
            then ServiceUnavailable. The default, 60 s, rides through a shard process restarted
            on its address (a few seconds) even on a loaded machine, and still reports a shard that
            is gone for good within a minute.
        retries: at most this many extra rounds over a shard's replicas after every replica answered
            UNAVAILABLE (None: as many as ``retry_deadline_s`` allows).
        cache: sizes of the trainer-side cache (``None``: no cache).
        transfer_dtype: ``"float16"`` asks float32 shards for float16 rows (half the
            bytes, less precision); the result is float32 either way.
        name: this client's ``trainer`` metric label.
        degrees: node degrees, needed when ``cache.static_rows > 0`` (pins the highest-degree nodes).
        max_workers: threads calling shards concurrently (default: two per shard).
        shared_memory: ``"auto"``: per replica, have rows written into this process's
            ``/dev/shm`` regions where a probe shows the server shares them (same host),
            bytes over gRPC elsewhere; ``"on"``: require it (ConfigError where a replica
            cannot); ``"off"``: always bytes. Regions are unlinked on :meth:`close`, at
            exit, and by multiprocessing's resource tracker if the process dies.
        security: TLS (CA, client certificate, server name) and the token, read here (None: plaintext,
            no token). It does not read the environment: see ``ClientSecurity.with_env_token``.
        bulk: ``"auto"``: rows that do not go through shared memory travel on a replica's bulk data plane
            when its Info advertises one (:mod:`saintpipe.services.feature_shard.bulk_client`), else in gRPC
            messages; ``"off"``: always gRPC messages.

    Creating a client tunes glibc's malloc for the whole process
    (:func:`saintpipe.core.malloc.tune_malloc`): freed buffers of up to
    32 MiB stay in the heap for the next gather instead of being unmapped.

    Raises:
        ConfigError: bad addresses or arguments; a security file missing or not PEM; a shard refused the
            token (UNAUTHENTICATED) or the TLS handshake.
        ServiceUnavailable: a shard has no replica answering its Info call.
        InvalidArgument: the shards' ranges, widths or dtypes do not fit together.

    Example::

        with FeatureClient([["127.0.0.1:50051"], ["127.0.0.1:50052"]]) as client:
            x = client.gather(subgraph.node_ids)   # float32 [n, feature_dim]
    """

    def __init__(
        self,
        shards: Sequence[Sequence[str]] | str | Path,
        *,
        deadline: float = 5.0,
        retry_deadline_s: float = 60.0,
        retries: int | None = None,
        cache: CacheConfig | None = None,
        transfer_dtype: str = "float32",
        name: str = "trainer",
        degrees: np.ndarray | None = None,
        max_workers: int | None = None,
        shared_memory: str = "auto",
        security: ClientSecurity | None = None,
        bulk: str = "auto",
    ) -> None:
        addresses = resolve_shards(shards)
        channel_security = (security or ClientSecurity()).load()
        if bulk not in BULK_MODES:
            raise ConfigError(f"bulk must be one of {BULK_MODES}, got {bulk!r}")
        self._bulk_mode = bulk
        self._channel_security = channel_security
        if shared_memory not in SHARED_MEMORY_MODES:
            raise ConfigError(f"shared_memory must be one of {SHARED_MEMORY_MODES}, got {shared_memory!r}")
        if not deadline > 0:
            raise ConfigError(f"deadline must be > 0 seconds, got {deadline}")
        if not retry_deadline_s >= 0:
            raise ConfigError(f"retry_deadline_s must be >= 0 seconds, got {retry_deadline_s}")
        if retries is not None and retries < 0:
            raise ConfigError(f"retries must be >= 0 or None, got {retries}")
        if transfer_dtype not in TRANSFER_DTYPES:
            raise ConfigError(f"transfer_dtype must be one of {TRANSFER_DTYPES}, got {transfer_dtype!r}")
        self.deadline, self.retry_deadline_s, self.name = float(deadline), float(retry_deadline_s), name
        self.retries = None if retries is None else int(retries)
        # Answers arrive as megabyte-sized messages: without this every one is a fresh mmap,
        # page-faulted in again on each gather (about half of the receive path's CPU).
        tune_malloc()
        self._stats_lock = threading.Lock()
        self._counters = dict.fromkeys(("requests", "rows_requested", "rows_fetched", "bytes_received", "shm_bytes",
                                        "shard_calls", "retries", "failovers"), 0)
        self._shards = [
            Shard(k, [connect_replica(a, channel_security) for a in replicas]) for k, replicas in enumerate(addresses)
        ]
        self._pool = futures.ThreadPoolExecutor(
            max_workers or max(2, 2 * len(self._shards)), thread_name_prefix=f"features-{name}"
        )
        self._closed = False
        self._shm_mode = shared_memory
        self._shm_dir = shm.SHM_DIR
        self._regions = shm.RegionPool(self._shm_dir) if shared_memory != "off" else None
        # The transports offered each shard call, in this order (saintpipe.services.feature_shard.transports).
        self._transports = (SharedMemory(self._replica_shm, self._probe, shared_memory == "on", self._count),
                            Bulk(self._bulk_channel, self._count), Unary(lambda: self._max_rows_unary, self._count),
                            Stream(self._count))
        try:
            self._connect(transfer_dtype)
            self._cache = self._build_cache(cache, degrees)
        except BaseException:
            self.close()
            raise
        # Without a cache every row is a miss, in the metrics as in stats(): the dashboard's hit-rate panel then
        # reads 0 instead of no data. (With one, the cache counts under the same label.)
        self._uncached_misses = metrics.CACHE_MISSES.labels(name)
        if self._cache is None:
            metrics.CACHE_HITS.labels(name)  # the series exists, at 0

    # -- set-up -------------------------------------------------------------------------------------------

    def _connect(self, transfer_dtype: str) -> None:
        """Ask every shard its Info (concurrently) and check that the shards fit together."""
        budget = Budget.start(self.deadline, self.retry_deadline_s)

        def on_every_shard(call: Callable[[Shard, Replica, float], T], what: str) -> list[T]:
            return list(self._pool.map(
                lambda shard: self._with_failover(shard, lambda r, t: call(shard, r, t), budget, what), self._shards))

        infos = on_every_shard(lambda shard, replica, timeout: self._ask_info(replica, timeout), "Info")
        first = infos[0]
        for shard, info in zip(self._shards, infos):
            shard.info = info
            where = f"feature shard {shard.index} at {shard.replicas[0].address}"
            if info.shard != shard.index or info.num_shards != len(self._shards):
                raise InvalidArgument(
                    f"{where} says it is shard {info.shard} of {info.num_shards}, but it is listed as shard "
                    f"{shard.index} of {len(self._shards)}: check the order of the addresses"
                )
            if (info.feature_dim, info.dtype, info.num_nodes) != (first.feature_dim, first.dtype, first.num_nodes):
                raise InvalidArgument(
                    f"{where} serves {info.num_nodes} nodes x {info.feature_dim} {info.dtype}, "
                    f"shard 0 {first.num_nodes} x {first.feature_dim} {first.dtype}"
                )
        self._starts = ranges.shard_starts([(i.start, i.stop) for i in infos])
        self.num_nodes = int(first.num_nodes)
        if self._starts[-1] != self.num_nodes:
            raise InvalidArgument(f"the shards cover nodes [0, {self._starts[-1]}) of {self.num_nodes}")
        self.feature_dim = int(first.feature_dim)
        self.stored_dtype = first.dtype
        # float16 on the wire only when it saves bytes; a float16 store is sent as stored.
        self._wire_dtype = "float16" if transfer_dtype == "float16" and self.stored_dtype == "float32" else ""
        # Ids per request message, so that a request never exceeds the smallest server limit;
        # answers of up to _max_rows_unary rows fit in one message and are asked for with GatherUnary.
        limit = min(int(i.max_message_bytes) for i in infos)
        # 400: room for the small fields, a shared-memory target with the longest region name and its secret.
        self._max_ids_per_call = max(1, (limit - 400) // 8)
        row_bytes = self.feature_dim * (2 if self._wire_dtype else np.dtype(self.stored_dtype).itemsize)
        self._max_rows_unary = max(0, (limit - CHUNK_OVERHEAD) // row_bytes)
        # Rows in a shared-memory region have the wire dtype (float16 ones are widened on the way out).
        self._region_dtype = np.dtype(
            np.float16 if self._wire_dtype or self.stored_dtype == "float16" else np.float32
        )
        if self._regions is not None:  # probe the replica that answered Info; the others on first use
            on_every_shard(self._replica_shm, "ProbeSharedMemory")

    @staticmethod
    def _ask_info(replica: Replica, timeout: float) -> pb.ShardInfo:
        info = replica.info(pb.InfoRequest(), timeout=timeout)
        replica.bulk_port = int(info.bulk_port)
        return info

    def _bulk_channel(self, replica: Replica, timeout: float) -> BulkChannel | None:
        """The replica's bulk channel; None where it has no bulk plane or the client does not use one."""
        if self._bulk_mode == "off":
            return None
        if replica.bulk_port is None:  # a replica that did not answer the start-up Info: ask it once
            self._ask_info(replica, timeout)
        if not replica.bulk_port:
            return None
        if replica.bulk is None:
            host = replica.address.rsplit(":", 1)[0]
            replica.bulk = BulkChannel(host, replica.bulk_port, self._channel_security)
        return replica.bulk

    def _replica_shm(self, shard: Shard, replica: Replica, timeout: float) -> bool:
        """Whether ``replica`` takes shared-memory targets from this client (probed once)."""
        if replica.shm is None:
            self._probe(shard, replica, timeout)
        return bool(replica.shm)

    def _probe(self, shard: Shard, replica: Replica, timeout: float) -> bool:
        """Probe ``replica`` (see :func:`shm.probe`); ConfigError with ``shared_memory="on"`` if it fails."""
        where = f"feature shard {shard.index} at {replica.address}"

        def ask(region: str, length: int, secret: bytes) -> pb.SharedMemoryProbeReply:
            return replica.probe(pb.SharedMemoryProbe(region=region, length=length, secret=secret), timeout=timeout)

        try:
            ok, why = shm.probe(ask, self._shm_dir)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            ok, why = False, "the server predates shared memory (no ProbeSharedMemory)"
        if not ok and self._shm_mode == "on":
            raise ConfigError(f"shared_memory='on', but {where} cannot use this host's shared memory: {why}")
        if ok:
            log.debug("%s: rows through shared memory", where)
        else:
            log.info("%s: rows over gRPC, not shared memory (%s)", where, why)
        replica.shm = ok
        return ok

    def _build_cache(self, config: CacheConfig | None, degrees: np.ndarray | None) -> FeatureCache | None:
        if config is None or not config.enabled:
            return None
        static_ids = np.empty(0, np.int64)
        if config.static_rows:
            if degrees is None:
                raise ConfigError(
                    "cache.static_rows > 0 pins the highest-degree nodes: pass degrees= "
                    "(e.g. open_dataset(dir).degrees())"
                )
            if len(degrees) != self.num_nodes:
                raise ConfigError(
                    f"degrees has {len(degrees)} entries, the shards serve {self.num_nodes} nodes"
                )
            static_ids = top_degree_nodes(degrees, config.static_rows)
        static_rows = self._fetch_all(static_ids)
        log.info("feature cache %s: %d static rows, %d LRU rows", self.name, static_ids.size, config.lru_rows)
        return FeatureCache(
            self.num_nodes,
            self.feature_dim,
            static_ids=static_ids,
            static_rows=static_rows,
            lru_rows=config.lru_rows,
            name=self.name,
        )

    # -- public API ---------------------------------------------------------------------------------------

    @property
    def shard_ranges(self) -> list[tuple[int, int]]:
        """``[start, stop)`` of every shard, in shard order."""
        return [(int(a), int(b)) for a, b in zip(self._starts[:-1], self._starts[1:])]

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """Feature rows of ``ids`` (any order, duplicates allowed) as float32 ``[len(ids), feature_dim]``.

        Raises:
            InvalidArgument: ids not 1-D integers, or naming the first id outside ``[0, num_nodes)``.
            ServiceUnavailable: no replica of a needed shard answered (names shard and addresses).
            SaintpipeTimeout: the deadline passed before every shard answered.
        """
        if self._closed:
            raise InvalidArgument("this FeatureClient is closed")
        ids = ranges.check_ids(ids, self.num_nodes)
        out = np.empty((ids.size, self.feature_dim), dtype=np.float32)
        self._count(requests=1, rows_requested=ids.size)
        if self._cache is not None:
            hit = self._cache.lookup(ids, out)
            miss_pos = np.flatnonzero(~hit)
        else:
            self._uncached_misses.inc(ids.size)
            miss_pos = None
        miss_ids = ids if miss_pos is None else ids[miss_pos]
        if miss_ids.size == 0:
            return out
        unique, first, inverse = ranges.first_occurrences(miss_ids)
        first_pos = first if miss_pos is None else miss_pos[first]
        if not (self._shm_usable() and self._gather_shared(miss_ids, unique, inverse, miss_pos, out)):
            self._fetch(unique, out, first_pos)
            # Duplicates were fetched once, into their first position; copy them to the others.
            all_pos = np.arange(miss_ids.size) if miss_pos is None else miss_pos
            source = first_pos[inverse]
            dup = all_pos != source
            if dup.any():
                out[all_pos[dup]] = out[source[dup]]
        if self._cache is not None:
            self._cache.insert(unique, out[first_pos])
        return out

    @property
    def shared_memory_active(self) -> bool:
        """Whether some replica has taken (or passed the probe for) shared-memory targets."""
        return self._regions is not None and any(r.shm for s in self._shards for r in s.replicas)

    def shared_memory_regions(self) -> list[str]:
        """Names of the ``/dev/shm`` regions this client holds now (unlinked on :meth:`close`)."""
        return self._regions.names() if self._regions is not None else []

    def stats(self) -> dict[str, float]:
        """Counters of this client: requests, rows requested and fetched, bytes received (over gRPC),
        bytes the servers wrote into shared memory (``shm_bytes``), retries, failovers, and the cache's
        hits, misses and hit rate (zero without a cache)."""
        with self._stats_lock:
            out: dict[str, float] = dict(self._counters)
        if self._cache is not None:
            out.update(self._cache.stats())
        else:
            out.update({"cache_hits": 0, "cache_misses": out["rows_requested"], "cache_hit_rate": 0.0})
        return out

    def close(self) -> None:
        """Close the channels and the thread pool. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        for shard in self._shards:
            for replica in shard.replicas:
                replica.channel.close()
                if replica.bulk is not None:
                    replica.bulk.close()
        if self._regions is not None:
            self._regions.close()

    def __enter__(self) -> "FeatureClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- fetching -----------------------------------------------------------------------------------------

    def _fetch_all(self, sorted_unique: np.ndarray) -> np.ndarray:
        """Rows of sorted unique ids, bypassing the cache."""
        rows = np.empty((sorted_unique.size, self.feature_dim), dtype=np.float32)
        if sorted_unique.size:
            self._fetch(sorted_unique, rows, np.arange(sorted_unique.size))
        return rows

    def _shm_usable(self) -> bool:
        return self._regions is not None and any(r.shm is not False for s in self._shards for r in s.replicas)

    def _gather_shared(
        self,
        ids: np.ndarray,
        unique: np.ndarray,
        inverse: np.ndarray,
        positions: np.ndarray | None,
        out: np.ndarray,
    ) -> bool:
        """Fetch ``unique`` into a shared-memory region, then ``out[positions] = region[inverse]`` in one
        pass (``positions`` None: all of ``out``). False (nothing fetched) if no region can be had."""
        nbytes = unique.size * self.feature_dim * self._region_dtype.itemsize
        regions = cast(shm.RegionPool, self._regions)  # not None: callers check _shm_usable first
        try:
            region = regions.acquire(nbytes)
        except OSError as exc:
            why = (
                f"cannot create or grow a shared-memory region of {nbytes} bytes under {self._shm_dir}: {exc}"
            )
            if self._shm_mode == "on":
                raise ConfigError(f"shared_memory='on', but {why}") from None
            log.warning("%s; this client now uses the bytes path", why)
            for shard in self._shards:
                for replica in shard.replicas:
                    replica.shm = False
            return False
        try:
            rows = region.rows(unique.size, self.feature_dim, self._region_dtype)
            self._fetch(unique, rows, np.arange(unique.size), region)
            if rows.dtype == np.float16:
                from saintpipe.services.feature_shard.half import copy_float16_rows  # loaded on first use

                copy_float16_rows(rows, inverse, out, np.arange(ids.size) if positions is None else positions)
            elif positions is not None:
                out[positions] = np.take(rows, inverse, axis=0, mode="clip")
            elif unique.size == ids.size and np.array_equal(ids, unique):  # sorted unique: one block copy
                out[...] = rows
            else:
                np.take(rows, inverse, axis=0, out=out, mode="clip")
            del rows
        except BaseException:
            region.tainted = True
            raise
        finally:
            regions.release(region)
        return True

    def _fetch(
        self, unique: np.ndarray, out: np.ndarray, positions: np.ndarray, region: shm.Region | None = None
    ) -> None:
        """Write the row of ``unique[i]`` (ascending) to ``out[positions[i]]``, asking shards concurrently.

        With ``region``, ``out`` is that region's rows: replicas that see it write there themselves.
        """
        budget = Budget.start(self.deadline, self.retry_deadline_s)
        calls = [
            (self._shards[k], a, b)
            for k, lo, hi in ranges.split_sorted(unique, self._starts)
            for a, b in ranges.pieces(lo, hi, self._max_ids_per_call)
        ]

        def run(call: tuple[Shard, int, int]) -> None:
            shard, a, b = call
            self._gather_piece(shard, unique[a:b], out, positions[a:b], budget, region)

        # The calling thread makes the first call itself: one thread hop fewer.
        pending = [self._pool.submit(run, c) for c in calls[1:]]
        try:
            run(calls[0])
            for done in pending:
                done.result()
        finally:
            for other in pending:
                other.cancel()

    def _gather_piece(
        self,
        shard: Shard,
        ids: np.ndarray,
        out: np.ndarray,
        positions: np.ndarray,
        budget: Budget,
        region: shm.Region | None = None,
    ) -> None:
        """One shard call: the first of the transports that applies to a replica fetches the rows."""
        piece = Piece(shard, ids, out, positions, pb.GatherRequest(ids=encode_ids(ids), transfer_dtype=self._wire_dtype),
                      region)

        def attempt(replica: Replica, timeout: float) -> None:
            for transport in self._transports:
                if transport.fetch(piece, replica, timeout):
                    return

        self._with_failover(shard, attempt, budget, "Gather")

    def _with_failover(
        self, shard: Shard, call: Callable[[Replica, float], T], budget: Budget, what: str
    ) -> T:
        return with_failover(shard, call, budget, what, retries=self.retries, count=self._count,
                             closed=lambda: self._closed)

    def _count(self, **amounts: int) -> None:
        with self._stats_lock:
            for key, value in amounts.items():
                self._counters[key] += int(value)
