"""The client side of the bulk data plane: one replica's bulk port, and gathers received in place.

Framing: :mod:`saintpipe.services.feature_shard.bulk_wire`. A :class:`BulkChannel`
keeps a few open connections to one replica (one per gather in flight), so a
gather costs no connection set-up. A gather whose rows go to one block of the
caller's array in the wire's dtype (sorted unique ids: a subgraph's node ids)
is received straight into that block; otherwise chunk by chunk into one
staging buffer, each chunk handed to ``place`` while the next one is on the wire.

Failures are raised as :class:`BulkError`, a ``grpc.RpcError`` with the status
code gRPC would have given, so that the client's failover and error mapping
(:func:`saintpipe.services.feature_shard.replicas.with_failover`) treat both
planes alike: a refused or dropped connection is UNAVAILABLE (next replica,
then retries), a deadline is DEADLINE_EXCEEDED, a refused token
UNAUTHENTICATED, a failed certificate check UNAVAILABLE with the TLS words the
failover turns into a ConfigError.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable

import grpc
import numpy as np

from saintpipe.core.errors import DecodeError
from saintpipe.services.feature_shard import bulk_socket as bs
from saintpipe.services.feature_shard import bulk_wire as bw
from saintpipe.services.feature_shard.bulk_server import CHUNK_BYTES
from saintpipe.services.feature_shard.security import PLAINTEXT, ChannelSecurity

_STATUS_CODES = {status: getattr(grpc.StatusCode, name) for status, name in bw.STATUS_NAMES.items()}
_MAX_IDLE = 8  # connections kept open per replica
_SOCKET_BUFFER = 4 << 20


class BulkError(grpc.RpcError):
    """A failed bulk gather, with the gRPC status code it stands for."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class BulkChannel:
    """Gathers from one replica's bulk port at ``host:port`` with ``security``'s TLS and token."""

    def __init__(self, host: str, port: int, security: ChannelSecurity = PLAINTEXT) -> None:
        self.host, self.port = host.strip("[]"), int(port)
        self.address = f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"
        self._security = security
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._staging = threading.local()

    def gather(
        self,
        ids: np.ndarray,
        *,
        dim: int,
        float16: bool,
        timeout: float,
        into: np.ndarray | None,
        place: Callable[[int, np.ndarray], int],
    ) -> int:
        """Rows of ``ids``: into ``into`` (``[len(ids), dim]``, C-contiguous) when the wire dtype is its dtype,
        else each chunk through ``place(offset, rows)``. Returns the payload bytes received.

        Raises:
            BulkError: see the module's docstring.
            DecodeError: the server answered rows that do not fit the request.
        """
        deadline = time.monotonic() + timeout
        request = bw.encode_request(ids, float16=float16, token=self._security.token)
        for attempt in range(2):
            conn, reused = self._acquire(deadline)
            try:
                for piece in request:
                    _settimeout(conn, deadline)
                    conn.sendall(piece)
                _settimeout(conn, deadline)
                head = _recv_exact(conn, bw.REPLY_HEAD.size)
            except (ConnectionError, ssl.SSLError, EOFError, BrokenPipeError) as exc:
                _close(conn)
                if reused and attempt == 0:  # an idle connection the server dropped (restart): one fresh try
                    continue
                raise BulkError(grpc.StatusCode.UNAVAILABLE, f"bulk {self.address}: {exc}") from None
            except BaseException as exc:
                _close(conn)
                raise _as_bulk_error(exc, self.address, timeout) from None
            break
        try:
            nbytes = self._receive(conn, head, ids.size, dim, deadline, into, place)
        except BaseException as exc:
            _close(conn)
            if isinstance(exc, (BulkError, DecodeError)):
                raise
            raise _as_bulk_error(exc, self.address, timeout) from None
        self._release(conn)
        return nbytes

    def close(self) -> None:
        """Close the idle connections; later gathers fail (idempotent)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)

    # -- internals -------------------------------------------------------------------------------------------

    def _receive(self, conn: socket.socket, head: bytes, count: int, dim: int, deadline: float,
                 into: np.ndarray | None, place: Callable[[int, np.ndarray], int]) -> int:
        status, dtype, rows, width, length = bw.parse_reply_head(head)
        message = _recv_exact(conn, length).decode("utf-8", "replace") if length else ""
        if status != bw.OK:
            raise BulkError(_STATUS_CODES[status], message or bw.STATUS_NAMES[status])
        if rows != count or width != dim:
            raise DecodeError(f"bulk {self.address}: answered {rows} rows of width {width} for {count} ids of "
                              f"width {dim}")
        nbytes = rows * dim * dtype.itemsize
        receive = bs.recv_all if bs.kernel_timeouts(conn) else _recv_into
        if into is not None and into.dtype == dtype:
            receive(conn, into.reshape(-1).data.cast("B"), deadline)
            return nbytes
        rows_per_chunk = max(1, CHUNK_BYTES // (dim * dtype.itemsize))
        staging = self._stage(min(rows, rows_per_chunk) * dim * dtype.itemsize)
        for lo in range(0, rows, rows_per_chunk):
            hi = min(lo + rows_per_chunk, rows)
            chunk = staging[: (hi - lo) * dim * dtype.itemsize]
            receive(conn, chunk.data, deadline)
            place(lo, chunk.view(dtype).reshape(hi - lo, dim))
        return nbytes

    def _stage(self, nbytes: int) -> np.ndarray:
        """This thread's staging buffer, at least ``nbytes`` (kept: a gather's chunks reuse it)."""
        buf = getattr(self._staging, "buf", None)
        if buf is None or buf.size < nbytes:
            buf = self._staging.buf = np.empty(nbytes, dtype=np.uint8)
        return buf

    def _acquire(self, deadline: float) -> tuple[socket.socket, bool]:
        with self._lock:
            if self._closed:
                raise BulkError(grpc.StatusCode.UNAVAILABLE, f"bulk {self.address}: the client was closed")
            if self._idle:
                return self._idle.pop(), True
        try:
            conn = socket.create_connection((self.host, self.port), timeout=max(0.001, deadline - time.monotonic()))
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
            if self._security.ssl_context is not None:
                conn = self._security.ssl_context.wrap_socket(
                    conn, server_hostname=self._security.server_name or self.host
                )
        except ssl.SSLCertVerificationError as exc:  # worded so that the failover reports a TLS mismatch
            raise BulkError(grpc.StatusCode.UNAVAILABLE,
                            f"bulk {self.address}: CERTIFICATE_VERIFY_FAILED: {exc.verify_message}") from None
        except (OSError, ssl.SSLError) as exc:
            if isinstance(exc, (TimeoutError, socket.timeout)):
                raise BulkError(grpc.StatusCode.UNAVAILABLE, f"bulk {self.address}: connect timed out") from None
            raise BulkError(grpc.StatusCode.UNAVAILABLE, f"bulk {self.address}: {exc}") from None
        return conn, False

    def _release(self, conn: socket.socket) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
                return
        _close(conn)


def _as_bulk_error(exc: BaseException, address: str, timeout: float) -> BaseException:
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return BulkError(grpc.StatusCode.DEADLINE_EXCEEDED, f"bulk {address}: no answer within {timeout:.3g} s")
    if isinstance(exc, (OSError, ssl.SSLError, EOFError)):
        return BulkError(grpc.StatusCode.UNAVAILABLE, f"bulk {address}: {exc}")
    return exc


def _settimeout(conn: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    conn.settimeout(left)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = bytearray(n)
    _recv_into(conn, memoryview(data), None)
    return bytes(data)


def _recv_into(conn: socket.socket, view: memoryview, deadline: float | None) -> None:
    got = 0
    while got < len(view):
        if deadline is not None:
            _settimeout(conn, deadline)
        n = conn.recv_into(view[got:])
        if n == 0:
            raise ConnectionError(f"the server closed the connection after {got} of {len(view)} bytes")
        got += n


def _close(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.close()
