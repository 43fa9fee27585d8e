"""Blocking socket calls with a kernel timeout, for the bulk plane's row streams.

Python gives a socket with a timeout ``O_NONBLOCK`` and waits in ``poll`` before
every ``send``/``recv``: a multi-megabyte answer then costs hundreds of
wake-ups and system call pairs, each returning whatever fits the socket
buffer at that moment. On a blocking socket the kernel moves the whole buffer
in one call (``sendall`` of a chunk; ``recv`` with ``MSG_WAITALL``), and
``SO_SNDTIMEO``/``SO_RCVTIMEO`` still bound each wait (docs/benchmarks/features.md).
TLS sockets keep the
timeout mode: a blocking SSL write cut by a timeout must be retried with the
same buffer, which ``sendall`` does not promise.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time

_TIMEVAL = struct.Struct("@ll")


def timeval(seconds: float) -> bytes:
    """``seconds`` as a ``struct timeval``, at least 1 µs (a zero timeval means "wait forever")."""
    micros = max(1, int(seconds * 1e6))
    return _TIMEVAL.pack(micros // 1_000_000, micros % 1_000_000)


def kernel_timeouts(sock: socket.socket) -> bool:
    """Whether ``sock`` can take the blocking calls here (plain TCP, not TLS)."""
    return not isinstance(sock, ssl.SSLSocket)


def block_for_send(sock: socket.socket, seconds: float) -> None:
    """Make ``sock`` blocking, each send waiting at most ``seconds`` for room (a timeout raises OSError).

    The socket's next ``settimeout`` returns it to Python's own timeout mode.
    """
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval(seconds))


def recv_all(sock: socket.socket, view: memoryview, deadline: float) -> None:
    """Fill ``view`` from ``sock`` by ``MSG_WAITALL`` receives, before ``time.monotonic()`` passes ``deadline``.

    Leaves ``sock`` blocking with no receive timeout: callers set their own timeout before the next call.

    Raises:
        TimeoutError: the deadline passed first.
        ConnectionError: the peer closed before ``view`` was full.
    """
    got = 0
    sock.settimeout(None)
    try:
        while got < len(view):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("deadline passed")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval(left))
            try:
                n = sock.recv_into(view[got:], 0, socket.MSG_WAITALL)
            except BlockingIOError:  # SO_RCVTIMEO ran out with nothing received: the loop checks the deadline
                continue
            if n == 0:
                raise ConnectionError(f"the server closed the connection after {got} of {len(view)} bytes")
            got += n
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _TIMEVAL.pack(0, 0))
