"""The feature-shard gRPC server: serves one contiguous node range of a dataset's features.

:class:`FeatureShardServicer` decodes ids, checks them against the shard's range and gathers rows from the
memory-mapped shard file straight into the answer's message bytes (``GatherUnary``, or a ``Gather`` stream
of chunks beyond the message limit), or into the client's shared-memory region when the request names one
(:mod:`saintpipe.services.feature_shard.shm`). Requests arrive as raw bytes and are parsed inside the call
(:mod:`saintpipe.services.feature_shard.parse`), so a message that cannot be decoded is INVALID_ARGUMENT
naming the field, not gRPC's INTERNAL with a traceback; typed saintpipe errors become status codes in
:class:`saintpipe.core.grpc_status.StatusInterceptor`. The gRPC health service is registered beside it.

Security (:mod:`saintpipe.services.feature_shard.security`): TLS only with a certificate, client
certificates with a client CA, and with a token every call but the health service's must carry it,
checked before the request is parsed (:mod:`saintpipe.services.feature_shard.auth`).
"""

from __future__ import annotations

import ipaddress
import logging
import time
import weakref
from concurrent import futures
from pathlib import Path
from typing import Iterator

import grpc
import numpy as np
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from saintpipe.core.errors import ConfigError, DecodeError, InvalidArgument, ServiceUnavailable
from saintpipe.core.grpc_status import StatusInterceptor
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.dataset.layout import shard_file
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.feature_shard import metrics
from saintpipe.services.feature_shard.auth import TokenInterceptor
from saintpipe.services.feature_shard.bulk_server import BulkServer
from saintpipe.services.feature_shard.config import DEFAULT_CHUNK_BYTES, DEFAULT_MAX_MESSAGE_BYTES
from saintpipe.services.feature_shard.lograte import FailureLog
from saintpipe.services.feature_shard.parse import parse_request, short_repr
from saintpipe.services.feature_shard.security import ServerSecurity
from saintpipe.services.feature_shard.shm import SHM_DIR, MappedRegions, check_region_name
from saintpipe.services.feature_shard.wire import (
    CHUNK_OVERHEAD,
    SERVICE_NAME,
    WIRE_DTYPES,
    allocate_chunk,
    decode_ids,
)

log = logging.getLogger(__name__)

_HEALTH: "weakref.WeakKeyDictionary[grpc.Server, health.HealthServicer]" = weakref.WeakKeyDictionary()
_SERVICERS: "weakref.WeakKeyDictionary[grpc.Server, FeatureShardServicer]" = weakref.WeakKeyDictionary()
_BULK: "weakref.WeakKeyDictionary[grpc.Server, BulkServer]" = weakref.WeakKeyDictionary()
_TARGET = "GatherRequest.shared_memory"


class FeatureShardServicer:
    """Answers Gather and Info for shard ``shard`` of the dataset at ``dataset_dir``."""

    def __init__(
        self,
        dataset_dir: Path | str,
        shard: int,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        shared_memory: bool = True,
        shared_memory_dir: Path | str = SHM_DIR,
        max_regions: int = 64,
    ) -> None:
        dataset = open_dataset(dataset_dir)
        manifest = dataset.manifest
        # np.asarray drops the np.memmap subclass: indexing stays a plain copy from the mapping.
        self._rows = np.asarray(dataset.feature_shard(shard))
        self.shard = shard
        self.start, self.stop = manifest.shards[shard]
        self.dtype = np.dtype(manifest.feature_dtype)
        self.dim = manifest.feature_dim
        self.max_message_bytes = max_message_bytes
        row_bytes = self.dim * self.dtype.itemsize
        if row_bytes + CHUNK_OVERHEAD > max_message_bytes:
            raise ConfigError(
                f"max_message_bytes {max_message_bytes} cannot hold one row of {row_bytes} bytes "
                f"({self.dim} x {self.dtype.name}); raise it"
            )
        self._chunk_bytes = min(chunk_bytes, max_message_bytes - CHUNK_OVERHEAD)
        self._label = str(shard)
        # Regions of clients on this host that asked for their rows in shared memory (None: refused).
        self._regions = MappedRegions(Path(shared_memory_dir), max_regions) if shared_memory else None
        self.info = pb.ShardInfo(
            shard=shard,
            num_shards=manifest.num_shards,
            start=self.start,
            stop=self.stop,
            num_nodes=manifest.num_nodes,
            feature_dim=self.dim,
            dtype=self.dtype.name,
            dataset=manifest.name,
            version=manifest.files.get(shard_file(shard), ""),
            max_message_bytes=max_message_bytes,
            shared_memory=shared_memory,
        )

    def Info(self, request: pb.InfoRequest, context: grpc.ServicerContext) -> pb.ShardInfo:
        return self.info

    def Gather(self, request: pb.GatherRequest, context: grpc.ServicerContext) -> Iterator[bytes]:
        """Stream the rows of ``request.ids`` as encoded ``GatherChunk`` messages."""
        began = time.perf_counter()
        ids, send_dtype = self._decode(request)
        if request.HasField("shared_memory"):  # one metadata chunk; no message limit applies
            yield self._gather_shared(request.shared_memory, ids, send_dtype)
        else:
            rows_per_chunk = max(1, self._chunk_bytes // (self.dim * send_dtype.itemsize))
            # No ids: one chunk of zero rows all the same (the client still learns dtype and width).
            for lo in range(0, max(ids.size, 1), rows_per_chunk):
                yield self._chunk(ids, lo, min(lo + rows_per_chunk, ids.size), send_dtype)
        self._done(began)

    def GatherUnary(self, request: pb.GatherRequest, context: grpc.ServicerContext) -> bytes:
        """The rows of ``request.ids`` as one encoded ``GatherChunk``, if it fits in one message."""
        began = time.perf_counter()
        ids, send_dtype = self._decode(request)
        size = ids.size * self.dim * send_dtype.itemsize + CHUNK_OVERHEAD
        if request.HasField("shared_memory"):
            message = self._gather_shared(request.shared_memory, ids, send_dtype)
        elif size > self.max_message_bytes:
            raise InvalidArgument(
                f"GatherUnary: {ids.size} rows of {self.dim} x {send_dtype.name} need {size} bytes, over "
                f"shard {self.shard}'s message limit of {self.max_message_bytes}: ask Gather (streaming)"
            )
        else:
            message = self._chunk(ids, 0, ids.size, send_dtype)
        self._done(began)
        return message

    def _decode(self, request: pb.GatherRequest) -> tuple[np.ndarray, np.dtype]:
        try:
            ids = decode_ids(request.ids)
        except DecodeError as exc:  # the caller's message is malformed: its mistake, not lost data
            raise InvalidArgument(str(exc)) from None
        send_dtype = self._send_dtype(request.transfer_dtype)
        self._check_range(ids)
        return ids, send_dtype

    def _chunk(self, ids: np.ndarray, lo: int, hi: int, send_dtype: np.dtype) -> bytes:
        """The encoded chunk of rows ``ids[lo:hi]`` (ids already checked against the range).

        The rows are gathered straight into the message (see :func:`wire.allocate_chunk`).
        """
        message, view = allocate_chunk(lo, hi - lo, self.dim, send_dtype)
        if hi > lo:
            self._fill(view, ids[lo:hi], send_dtype)
        del view  # the message is complete; nothing may write to it any more
        self._count(len(message), hi - lo)
        return message

    def _gather_shared(self, target: pb.SharedMemoryTarget, ids: np.ndarray, send_dtype: np.dtype) -> bytes:
        """Write the rows of ``ids`` into the request's shared-memory region; the metadata-only answer."""
        if self._regions is None:
            raise InvalidArgument(
                f"{_TARGET}: shard {self.shard} does not accept shared-memory targets (started with "
                "--no-shared-memory); send the request without it"
            )
        check_region_name(target.region, f"{_TARGET}.region")
        nbytes = ids.size * self.dim * send_dtype.itemsize
        if target.capacity < nbytes:
            raise InvalidArgument(
                f"{_TARGET}.capacity {target.capacity} bytes is too small for the answer: {ids.size} rows x "
                f"{self.dim} {send_dtype.name} = {nbytes} bytes"
            )
        # Checked for zero rows too (the region's secret, the header): the answer never depends on the row count.
        view = self._regions.view(target.region, target.offset, nbytes, _TARGET, target.secret)
        if ids.size:
            self._fill(np.ndarray((ids.size, self.dim), dtype=send_dtype, buffer=view), ids, send_dtype)
        del view
        self._count(nbytes, ids.size)
        return pb.GatherChunk(
            offset=0, dtype=send_dtype.name, shape=(ids.size, self.dim), in_shared_memory=True
        ).SerializeToString()

    def _fill(self, out: np.ndarray, ids: np.ndarray, send_dtype: np.dtype) -> None:
        """``out[:] = rows of ids`` (global ids, already checked against the range) in ``send_dtype``."""
        local = ids - self.start
        if send_dtype == self.dtype:
            # mode="clip" never clips (the ids were checked) but skips numpy's bounds-checking pass.
            np.take(self._rows, local, axis=0, out=out, mode="clip")
        elif self.dtype == np.float32 and send_dtype == np.float16:
            from saintpipe.services.feature_shard.half import gather_float16_rows  # Numba: loaded on first use

            gather_float16_rows(self._rows, local, out)
        else:
            out[...] = np.take(self._rows, local, axis=0, mode="clip")

    def ProbeSharedMemory(
        self, request: pb.SharedMemoryProbe, context: grpc.ServicerContext
    ) -> pb.SharedMemoryProbeReply:
        """Whether this server sees the caller's region (see :func:`saintpipe.services.feature_shard.shm.probe`)."""
        if self._regions is None:
            return pb.SharedMemoryProbeReply(
                readable=False, detail=f"shard {self.shard} has shared memory disabled (--no-shared-memory)"
            )
        readable, token, detail = self._regions.probe(request.region, request.length, request.secret)
        return pb.SharedMemoryProbeReply(readable=readable, token=token, detail=detail)

    def close(self) -> None:
        """Unmap the shared-memory regions this server opened."""
        if self._regions is not None:
            self._regions.close()

    def _done(self, began: float) -> None:
        metrics.REQUESTS.labels(self._label).inc()
        metrics.REQUEST_SECONDS.labels(self._label).observe(time.perf_counter() - began)

    def _count(self, nbytes: int, rows: int) -> None:
        metrics.ROWS.labels(self._label).inc(rows)
        metrics.BYTES.labels(self._label).inc(nbytes)

    def _send_dtype(self, requested: str) -> np.dtype:
        if not requested:
            return self.dtype
        if requested not in WIRE_DTYPES:
            raise InvalidArgument(
                f"GatherRequest.transfer_dtype {short_repr(requested)} is not one of {sorted(WIRE_DTYPES)} "
                "(or empty)"
            )
        return WIRE_DTYPES[requested]

    def _check_range(self, ids: np.ndarray) -> None:
        if ids.size == 0:
            return
        bad = (ids < self.start) | (ids >= self.stop)
        if bad.any():
            pos = int(np.argmax(bad))
            raise InvalidArgument(
                f"node id {int(ids[pos])} (position {pos} of the request) is not served by shard "
                f"{self.shard}, which holds [{self.start}, {self.stop})"
            )

    def error_hook(self, method: str, code: grpc.StatusCode) -> None:
        metrics.ERRORS.labels(self._label, code.name).inc()


def _parsed(method, request_class):
    """``method`` taking the request's raw bytes: parsed here, inside the call, where the status interceptor
    turns a bad message into INVALID_ARGUMENT (gRPC's own deserializer would answer INTERNAL and log a
    traceback per message)."""

    def handler(data: bytes, context: grpc.ServicerContext):
        return method(parse_request(request_class, data), context)

    return handler


def _handlers(servicer: FeatureShardServicer) -> grpc.GenericRpcHandler:
    # Registered by hand rather than with the generated add_..._to_server so that requests arrive as bytes
    # (see _parsed) and the Gather methods' chunks, already encoded by saintpipe.services.feature_shard.wire,
    # pass through unserialized.
    def handler(kind, method, request_class, response_serializer=None) -> grpc.RpcMethodHandler:
        return kind(_parsed(method, request_class), request_deserializer=None, response_serializer=response_serializer)

    return grpc.method_handlers_generic_handler(
        SERVICE_NAME,
        {
            "Gather": handler(grpc.unary_stream_rpc_method_handler, servicer.Gather, pb.GatherRequest),
            "GatherUnary": handler(grpc.unary_unary_rpc_method_handler, servicer.GatherUnary, pb.GatherRequest),
            "Info": handler(grpc.unary_unary_rpc_method_handler, servicer.Info, pb.InfoRequest,
                            pb.ShardInfo.SerializeToString),
            "ProbeSharedMemory": handler(grpc.unary_unary_rpc_method_handler, servicer.ProbeSharedMemory,
                                         pb.SharedMemoryProbe, pb.SharedMemoryProbeReply.SerializeToString),
        },
    )


def create_server(
    dataset_dir: Path | str,
    shard: int,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_workers: int = 8,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    shared_memory: bool = True,
    shared_memory_dir: Path | str = SHM_DIR,
    log_interval_s: float = 10.0,
    security: ServerSecurity | None = None,
    bulk_port: int | None = None,
) -> tuple[grpc.Server, int]:
    """Start a server for shard ``shard`` of the dataset at ``dataset_dir``.

    Args:
        dataset_dir: the dataset directory; the shard file is memory-mapped.
        shard: index of the shard to serve.
        host, port: where to listen; ``port=0`` picks a free port.
        max_workers: handler threads, i.e. calls served at once.
        max_message_bytes: largest message sent or received; answers above it are split into chunks.
        chunk_bytes: target chunk size (clipped to the message limit).
        shared_memory: accept shared-memory targets from clients on this host (False: refuse them; the
            probe then tells clients to use the bytes path).
        shared_memory_dir: where region names are looked up (``/dev/shm``; tests point it elsewhere to
            play a server that does not share the client's ``/dev/shm``).
        log_interval_s: failed calls are logged at most once per this many seconds per peer host and kind
            (rejected request / unexpected error), with a count of those left out.
        security: TLS certificate and key, client CA (mutual TLS), token; None: plaintext, no token. A
            non-loopback ``host`` without TLS or without a token is logged as a WARNING.
        bulk_port: also serve gathers on the bulk data plane (:mod:`saintpipe.services.feature_shard.bulk_server`)
            on this TCP port of ``host`` (0: a free one), with the same security; advertised in
            ``ShardInfo.bulk_port``. None: no bulk plane (clients use gRPC).

    Returns:
        ``(server, bound port)``; the server is started. Stop it with :func:`stop_server`.

    Raises:
        DatasetError: the dataset or shard is missing or malformed.
        ConfigError: the message limit cannot hold one row; a security file is missing or not PEM; a bad token.
        ServiceUnavailable: the address cannot be bound.

    Example::

        server, port = create_server("data/demo", 0)
        ...
        stop_server(server, grace=5.0)
    """
    loaded = (security or ServerSecurity()).load()  # files first: a bad path fails before the dataset opens
    servicer = FeatureShardServicer(
        dataset_dir,
        shard,
        max_message_bytes=max_message_bytes,
        chunk_bytes=chunk_bytes,
        shared_memory=shared_memory,
        shared_memory_dir=shared_memory_dir,
    )
    options = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]
    failures = FailureLog(f"feature shard {shard}", log_interval_s, log)
    interceptors: list[grpc.ServerInterceptor] = [StatusInterceptor(servicer.error_hook, failures)]
    if loaded.token:  # first: a call without the token is refused before anything else looks at it

        def denied(method: str, context: grpc.ServicerContext, exc: Exception, code: grpc.StatusCode) -> None:
            servicer.error_hook(method, code)
            failures(method, context, exc, code)

        interceptors.insert(0, TokenInterceptor(loaded.token, denied))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"shard{shard}"),
        interceptors=interceptors,
        options=options,
    )
    server.add_generic_rpc_handlers((_handlers(servicer),))
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if loaded.credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, loaded.credentials)
    except RuntimeError as exc:
        raise ServiceUnavailable(f"feature shard {shard}: cannot listen on {address}: {exc}") from None
    if bound == 0:
        raise ServiceUnavailable(f"feature shard {shard}: cannot listen on {address} (in use?)")
    if bulk_port is not None:
        try:
            bulk = BulkServer(servicer, host, bulk_port, token=loaded.token, ssl_context=loaded.ssl_context,
                              max_connections=max(8, 4 * max_workers), log_interval_s=log_interval_s)
        except BaseException:
            server.stop(None)
            raise
        servicer.info.bulk_port = bulk.port
        _BULK[server] = bulk
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    _HEALTH[server] = health_servicer
    _SERVICERS[server] = servicer
    log.info(
        "feature shard %d [%d, %d) of %s listening on %s:%d%s: %s",
        shard,
        servicer.start,
        servicer.stop,
        dataset_dir,
        host,
        bound,
        f" (bulk data plane on port {servicer.info.bulk_port})" if servicer.info.bulk_port else "",
        loaded.describe(),
    )
    if not _is_loopback(host) and (loaded.credentials is None or not loaded.token):
        missing = " and ".join(
            what for what, off in (("TLS (--tls-cert/--tls-key)", loaded.credentials is None),
                                   ("a token (--token-file or SAINTPIPE_FEATURE_TOKEN)", not loaded.token)) if off
        )
        log.warning(
            "feature shard %d listens on %s, beyond this host, without %s: whoever reaches the port can read "
            "every feature row of this shard; see docs/explanation/features.md#security",
            shard,
            host,
            missing,
        )
    return server, bound


def _is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this host only (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def stop_server(server: grpc.Server, grace: float | None = 5.0) -> None:
    """Stop gracefully: health turns NOT_SERVING, new calls are refused, calls in flight get ``grace`` s."""
    health_servicer = _HEALTH.pop(server, None)
    if health_servicer is not None:
        health_servicer.enter_graceful_shutdown()
    bulk = _BULK.pop(server, None)
    if bulk is not None:  # no new bulk gathers; the client fails over or retries, as on a stopped gRPC port
        bulk.close()
    server.stop(grace).wait()
    servicer = _SERVICERS.pop(server, None)
    if servicer is not None:
        servicer.close()
