"""The shard's bulk data plane: gathers answered as one stream of rows on a TCP (or TLS) connection.

Framing and the reasons for a second port: :mod:`saintpipe.services.feature_shard.bulk_wire`.
A thin server: an accept thread, one thread per connection (at most
``max_connections``; more are closed at once, which the client treats as an
unavailable replica), and the gRPC servicer's own checks and gather
(:class:`~saintpipe.services.feature_shard.server.FeatureShardServicer`): the same id
range check, the same float16 narrowing, the same metrics. Rows are gathered
into a reused chunk buffer and sent chunk by chunk, so the kernel sends one
chunk while the next is gathered.

Security is the gRPC port's: TLS with the same certificate (and client CA)
when the shard has one, the same token compared in constant time, checked
before any id is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import socket
import ssl
import threading
import time
from typing import Protocol

import numpy as np

from saintpipe.core.errors import DecodeError, InvalidArgument, ServiceUnavailable
from saintpipe.services.feature_shard import bulk_socket as bs
from saintpipe.services.feature_shard import bulk_wire as bw
from saintpipe.services.feature_shard import metrics
from saintpipe.services.feature_shard.auth import DENIED
from saintpipe.services.feature_shard.lograte import RateLimiter


class RowSource(Protocol):
    """What the bulk plane needs of the gRPC servicer (``server.FeatureShardServicer``): its shard, limits,
    checks, gather and metrics, so that both planes answer alike."""

    shard: int
    dim: int
    dtype: np.dtype
    max_message_bytes: int

    def _send_dtype(self, requested: str) -> np.dtype: ...
    def _check_range(self, ids: np.ndarray) -> None: ...
    def _fill(self, out: np.ndarray, ids: np.ndarray, send_dtype: np.dtype) -> None: ...
    def _count(self, nbytes: int, rows: int) -> None: ...
    def _done(self, began: float) -> None: ...


log = logging.getLogger(__name__)

# Rows gathered and sent per step: 2 MiB measured best of 0.5-8 MiB (docs/benchmarks/features.md).
CHUNK_BYTES = 2 << 20
_IDLE_TIMEOUT_S = 600.0  # a client's connection may wait this long between gathers
_IO_TIMEOUT_S = 60.0  # once a request began, each read or write must progress within this
_SOCKET_BUFFER = 4 << 20  # kernel buffers large enough for two chunks in flight


class BulkServer:
    """Serves ``servicer``'s shard on ``host:port`` (0: a free port, then :attr:`port`).

    Raises:
        ServiceUnavailable: the address cannot be bound.
    """

    def __init__(
        self,
        servicer: RowSource,
        host: str,
        port: int,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = 64,
        log_interval_s: float = 10.0,
    ) -> None:
        self._servicer = servicer
        self._expected = hashlib.sha256((token or "").encode("utf-8", "surrogateescape")).digest()
        self._token_required = bool(token)
        self._ssl = ssl_context
        self._max_connections = max_connections
        self._limiter = RateLimiter(log_interval_s)
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._closed = False
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self._listener = socket.create_server((host.strip("[]"), port), family=family, backlog=128)
        except OSError as exc:
            raise ServiceUnavailable(f"feature shard {servicer.shard}: cannot listen on {host}:{port} (bulk data "
                                     f"plane): {exc}") from None
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name=f"bulk{servicer.shard}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting and close every connection (a gather in flight fails over on the client). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections = list(self._connections)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5.0)

    # -- connections -----------------------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed or len(self._connections) >= self._max_connections:
                    conn.close()
                    continue
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn, peer[0]), name=f"bulk{self._servicer.shard}-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket, peer: str) -> None:
        stream: socket.socket = conn
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
            conn.settimeout(_IO_TIMEOUT_S)
            if self._ssl is not None:
                stream = self._ssl.wrap_socket(conn, server_side=True)
            scratch = [np.empty(0, dtype=np.uint8)]  # the chunk buffer, grown once and reused
            while self._handle(stream, peer, scratch):
                pass
        except (OSError, ssl.SSLError) as exc:  # a client gone, a failed handshake: nothing to answer
            log.debug("bulk connection from %s ended: %s", peer, exc)
        finally:
            with self._lock:
                self._connections.discard(conn)
            with contextlib.suppress(OSError):
                stream.close()

    def _handle(self, stream: socket.socket, peer: str, buffer: list[np.ndarray]) -> bool:
        """Answer one request; False when the connection should close."""
        stream.settimeout(_IDLE_TIMEOUT_S)
        head = _read_exact(stream, 12)
        if head is None:
            return False  # the client closed between requests
        stream.settimeout(_IO_TIMEOUT_S)
        began = time.perf_counter()
        servicer = self._servicer
        try:
            flags, token_len = bw.parse_request_head(head)
            token = _read_exact(stream, token_len) if token_len else b""
            if token is None:
                return False  # the client closed mid-request
            if self._token_required and not hmac.compare_digest(hashlib.sha256(token).digest(), self._expected):
                self._refuse(stream, peer, bw.UNAUTHENTICATED, DENIED)
                return False
            raw_count = _read_exact(stream, 8)
            if raw_count is None:
                return False
            count = bw.parse_count(raw_count, servicer.max_message_bytes // 8)
            ids = np.empty(count, dtype="<i8")
            if count and not _read_into(stream, ids.data.cast("B")):
                return False
            send_dtype = servicer._send_dtype("float16" if flags & bw.FLAG_FLOAT16 else "")
            servicer._check_range(ids)
        except DecodeError as exc:  # the stream's framing is lost: answer, then close
            self._refuse(stream, peer, bw.INVALID_ARGUMENT, str(exc))
            return False
        except InvalidArgument as exc:  # a well-framed request the shard cannot serve: the connection stays
            self._refuse(stream, peer, bw.INVALID_ARGUMENT, str(exc))
            return True
        dim = servicer.dim
        if bs.kernel_timeouts(stream):  # the next request's read returns to Python's timeout mode
            bs.block_for_send(stream, _IO_TIMEOUT_S)
        stream.sendall(bw.encode_reply_head(bw.OK, send_dtype, count, dim))
        rows_per_chunk = max(1, CHUNK_BYTES // (dim * send_dtype.itemsize))
        need = min(count, rows_per_chunk) * dim * send_dtype.itemsize
        if buffer[0].size < need:
            buffer[0] = np.empty(need, dtype=np.uint8)
        for lo in range(0, count, rows_per_chunk):
            hi = min(lo + rows_per_chunk, count)
            chunk = buffer[0][: (hi - lo) * dim * send_dtype.itemsize].view(send_dtype).reshape(hi - lo, dim)
            servicer._fill(chunk, ids[lo:hi], send_dtype)
            stream.sendall(chunk.data.cast("B"))  # returns once the kernel holds it: the buffer is free
        servicer._count(count * dim * send_dtype.itemsize, count)
        servicer._done(began)
        return True

    def _refuse(self, stream: socket.socket, peer: str, status: int, message: str) -> None:
        servicer = self._servicer
        metrics_code = bw.STATUS_NAMES[status]
        metrics.ERRORS.labels(str(servicer.shard), metrics_code).inc()
        held_back = self._limiter.allow((peer, status))
        if held_back is not None:
            log.warning("feature shard %d: bulk request from %s refused (%s): %s%s", servicer.shard, peer,
                        metrics_code, message, f" ({held_back} more since the last line)" if held_back else "")
        with contextlib.suppress(OSError):
            stream.sendall(bw.encode_reply_head(status, servicer.dtype, 0, servicer.dim, message))


def _read_exact(stream: socket.socket, n: int) -> bytes | None:
    """``n`` bytes, or None if the peer closed before the first one."""
    data = bytearray(n)
    if n and not _read_into(stream, memoryview(data)):
        return None
    return bytes(data)


def _read_into(stream: socket.socket, view: memoryview) -> bool:
    """Fill ``view``; False if the peer closed before the first byte. A close mid-way raises ConnectionError."""
    got = 0
    while got < len(view):
        n = stream.recv_into(view[got:])
        if n == 0:
            if got == 0:
                return False
            raise ConnectionError(f"the peer closed after {got} of {len(view)} bytes")
        got += n
    return True

