"""Lean pipelined round trips on redis-py connections, for the pool's hot path.

redis-py does the connecting (TCP, TLS or unix socket, AUTH, SELECT, timeouts)
and the pool's cold paths. Sending a ~1 MB subgraph and reading one back is
where its generic machinery costs most: ``Pipeline`` spends about a loopback
round trip of Python time, its packer wants each argument in one buffer, and
its pure-Python reply parser copies a large bulk reply four or five times
through intermediate buffers (``hiredis`` does not help here: its packer copies
the value and its reader grows a buffer by reallocation). So the pool packs its
commands here, sends them in one ``sendmsg`` (array pieces straight from numpy,
no join), and reads the replies itself: small replies through one reusable
buffer per connection, a large bulk string straight from the socket into a
fresh buffer the caller keeps (one copy, the kernel's).

Replies are RESP3 (redis-py's default) or RESP2: bulk strings come back as ``bytes`` or, from ``BIG_BULK`` bytes on, as a
writable ``memoryview`` of a buffer nobody else references; integers as
``int``; simple strings as ``bytes``; arrays and sets as lists, maps as dicts;
nil as ``None``; error
replies are mapped to redis-py's exception classes (``NOSCRIPT`` ->
``NoScriptError``, ``LOADING`` -> ``BusyLoadingError``, ...), so callers handle
them as they would redis-py's own.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import cast

import numpy as np
import redis
from redis._parsers.base import BaseParser

# One argument: bytes-like, str, int, or a list of bytes-like pieces sent as one bulk string without joining.
Arg = bytes | bytearray | memoryview | str | int | float | list
_SMALL = 16 * 1024
# Bulk replies from this size on are read straight into their own buffer.
BIG_BULK = 64 * 1024
_BUFFER = 64 * 1024
# sendmsg takes at most IOV_MAX (1024 on Linux) buffers per call.
_IOV_MAX = 512
_READER_ATTR = "_saintpipe_reader"
# Bumped in a forked child, which must open connections of its own.
_FORKS = [0]
os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))


def pack(*args: Arg) -> list:
    """RESP-encode one command; large buffers are passed through, small pieces coalesced."""
    out: list = []
    chunks = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        elif isinstance(arg, float):
            arg = repr(arg).encode()
        if type(arg) is bytes and len(arg) < _SMALL:  # the common case: one small piece
            chunks.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
            continue
        # Pieces are sent in place (no joining), as bytes or byte-format views, so that len() counts bytes.
        pieces = [_flat(p) for p in arg] if isinstance(arg, list) else [_flat(arg)]
        chunks.append(b"$%d\r\n" % sum(len(p) for p in pieces))
        out.append(b"".join(chunks))
        out += pieces
        chunks = [b"\r\n"]
    out.append(b"".join(chunks))
    return out


def _flat(piece: bytes | bytearray | memoryview) -> bytes | memoryview:
    if type(piece) is bytes or (type(piece) is memoryview and piece.format == "B" and piece.ndim == 1):
        return piece
    return memoryview(piece).cast("B")


class _Reader:
    """RESP replies from one socket: small ones through a reusable buffer, big bulks straight to their own."""

    __slots__ = ("buf", "end", "sock", "start", "view")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray(_BUFFER)
        self.view = memoryview(self.buf)
        self.start = self.end = 0

    @property
    def buffered(self) -> int:
        return self.end - self.start

    def _fill(self) -> None:
        """Receive more bytes after those buffered, making room first."""
        if self.start == self.end:
            self.start = self.end = 0
        elif self.end == len(self.buf):
            kept = self.end - self.start
            if self.start:  # move the unread tail to the front
                self.buf[:kept] = self.view[self.start : self.end]
            else:  # a long line or a mid-sized bulk: grow
                self.view.release()
                self.buf.extend(bytes(len(self.buf)))
                self.view = memoryview(self.buf)
            self.start, self.end = 0, kept
        self.end += self._recv_into(self.view[self.end :])

    def _recv_into(self, target: memoryview) -> int:
        n = self.sock.recv_into(target)
        if n == 0:
            raise redis.ConnectionError("Connection closed by server.")
        return n

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n", self.start, self.end)
            if i >= 0:
                line = bytes(self.view[self.start : i])
                self.start = i + 2
                return line
            self._fill()

    def read(self):
        """One reply (an error reply is returned as the exception, not raised)."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._bulk(n)
        if kind == b":":
            return int(rest)
        if kind == b"*" or kind == b"~":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if kind == b"_":
            return None
        if kind == b"+":
            return rest
        if kind == b"-":
            return _error(rest)
        if kind == b"%":
            return {self._key(): self.read() for _ in range(int(rest))}
        if kind == b"#":
            return rest == b"t"
        if kind == b",":
            return float(rest)
        if kind == b"(":
            return int(rest)
        if kind == b"=":
            return bytes(self._bulk(int(rest)))[4:]  # "txt:" or "mkd:" first
        if kind == b"!":
            return _error(bytes(self._bulk(int(rest))))
        if kind == b"|":  # attributes describe the reply that follows: skip them
            for _ in range(2 * int(rest)):
                self.read()
            return self.read()
        raise redis.ConnectionError(f"unexpected reply {line[:40]!r} from Redis")

    def _key(self):
        key = self.read()
        return bytes(key) if isinstance(key, memoryview) else key

    def _bulk(self, n: int) -> bytes | memoryview:
        if n < BIG_BULK:
            while self.end - self.start < n + 2:
                self._fill()
            out: bytes | memoryview = bytes(self.view[self.start : self.start + n])
            self.start += n
        else:
            # np.empty: no zero-filling of memory that recv overwrites at once.
            target = np.empty(n, dtype=np.uint8).data
            have = min(n, self.end - self.start)
            target[:have] = self.view[self.start : self.start + have]
            self.start += have
            while have < n:
                have += self._recv_into(target[have:])
            out = target
        while self.end - self.start < 2:
            self._fill()
        if self.buf[self.start : self.start + 2] != b"\r\n":
            raise redis.ConnectionError("malformed bulk reply from Redis (no CRLF after the payload)")
        self.start += 2
        return out


def _error(message: bytes) -> redis.RedisError:
    return BaseParser.parse_error(message.decode("utf-8", "replace"))


def _reader(conn: redis.Connection) -> _Reader:
    """The connection's reader, made afresh whenever redis-py has (re)connected its socket."""
    # redis-py 8: the connected socket (pinned in pyproject.toml); its annotations type the attribute as None.
    sock = cast(socket.socket, conn._sock)
    reader = conn.__dict__.get(_READER_ATTR)
    if reader is None or reader.sock is not sock:
        reader = _Reader(sock)
        setattr(conn, _READER_ATTR, reader)
    return reader


def _send(sock: socket.socket, chunks: list) -> None:
    """Write every chunk (bytes, or byte-format memoryviews), in as few system calls as the kernel accepts."""
    total = sum(len(c) for c in chunks)
    sent = sock.sendmsg(chunks[:_IOV_MAX]) if chunks else 0
    if sent == total:
        return
    views = [
        memoryview(c) for c in chunks
    ]  # a partial write (full socket buffer): go on from where it stopped
    while views:
        while views and sent >= len(views[0]):
            sent -= len(views[0])
            views.pop(0)
        if sent:
            views[0] = views[0][sent:]
        if views:
            sent = sock.sendmsg(views[:_IOV_MAX])


def send(conn: redis.Connection, commands: Sequence[list]) -> None:
    """Write packed commands on ``conn`` in one go (connecting it first if needed); read nothing."""
    conn.connect()
    try:
        _send(cast(socket.socket, conn._sock), [chunk for command in commands for chunk in command])
    except TimeoutError:
        conn.disconnect()
        raise redis.TimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        conn.disconnect()
        raise redis.ConnectionError(f"Error while writing to socket: {exc}") from None


def receive(conn: redis.Connection, count: int) -> list:
    """Read ``count`` replies on ``conn``; error replies are returned as exception objects.

    A broken connection, a timeout or a reply out of step drops the connection.
    """
    reader = _reader(conn)
    try:
        replies = [reader.read() for _ in range(count)]
    except TimeoutError:
        conn.disconnect()
        raise redis.TimeoutError("Timeout reading from socket") from None
    except (redis.ConnectionError, OSError, ValueError) as exc:
        conn.disconnect()
        if isinstance(exc, redis.ConnectionError):
            raise
        raise redis.ConnectionError(f"Error while reading from socket: {exc}") from None
    if reader.buffered:  # more than was asked for: the connection is out of step
        conn.disconnect()
        raise redis.ConnectionError("Redis sent more replies than commands were sent")
    return replies


def raise_first_error(replies: list) -> list:
    """Return ``replies``, or raise the first error reply among them."""
    for reply in replies:
        if isinstance(reply, redis.RedisError):
            raise reply
    return replies


class Connections:
    """The hot path's own connections to one server: taken and given back without redis-py's pool.

    redis-py's ``ConnectionPool`` checks each connection's socket for stray data
    and records metrics on every checkout, which costs a sizeable part of a
    loopback round trip. Here connections wait in a LIFO list; one that the
    server closed while it waited (a restart, an idle timeout) is noticed when
    the exchange on it fails, and the exchange is retried once at once on a
    fresh connection. Thread-safe; after a fork the child starts afresh.

    Args:
        client: the redis-py client whose connection settings (URL, password,
            timeouts, read size) new connections copy.
    """

    def __init__(self, client: redis.Redis) -> None:
        self._pool = client.connection_pool
        self._idle: list[redis.Connection] = []
        self._forks = _FORKS[0]

    def exchange(self, commands: Sequence[list], *, raise_errors: bool = True) -> list:
        """Send packed commands in one write and return their replies.

        Every reply is read (keeping the connection in step) before the first
        error reply, if any, is raised (or, with ``raise_errors=False``, returned
        in its place). A connection-level failure drops the connection and raises
        ``redis.ConnectionError`` or ``redis.TimeoutError``.
        """
        conn = self._take()
        try:
            reused = conn._sock is not None
            try:
                send(conn, commands)
                replies = receive(conn, len(commands))
            except redis.ConnectionError:
                if not reused:
                    raise
                send(conn, commands)  # the server closed it while it waited: reconnect once, now
                replies = receive(conn, len(commands))
        except BaseException:
            conn.disconnect()
            raise
        finally:
            self._idle.append(conn)
        return raise_first_error(replies) if raise_errors else replies

    def start(self, commands: Sequence[list]) -> PendingExchange:
        """Send packed commands in one write and return at once; the replies are read later.

        The connection stays out of the idle list until :meth:`PendingExchange.replies`
        has read them. A failure to send drops the connection and raises as
        :meth:`exchange` does (no reconnect here: the caller's fallback is ``exchange``).
        """
        conn = self._take()
        try:
            send(conn, commands)
        except BaseException:
            conn.disconnect()
            self._idle.append(conn)
            raise
        return PendingExchange(self, conn, len(commands))

    def _take(self) -> redis.Connection:
        if self._forks != _FORKS[0]:  # forked: the parent's sockets are not ours to use
            self._idle, self._forks = [], _FORKS[0]
        try:
            return self._idle.pop()
        except IndexError:
            return self._pool.connection_class(**self._pool.connection_kwargs)

    def close(self) -> None:
        """Close the idle connections (one in use is closed when it comes back and is used again)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.disconnect()


class PendingExchange:
    """Commands sent by :meth:`Connections.start` whose replies are still on the wire."""

    def __init__(self, owner: Connections, conn: redis.Connection, count: int) -> None:
        self._owner, self._conn, self._count = owner, conn, count

    def replies(self) -> list:
        """Read the replies (error replies as exception objects) and give the connection back.

        Raises:
            redis.ConnectionError, redis.TimeoutError: the connection broke; whether
                Redis ran the commands is unknown.
        """
        try:
            return receive(self._conn, self._count)
        except BaseException:
            self._conn.disconnect()
            raise
        finally:
            if self._owner._forks == _FORKS[0]:
                self._owner._idle.append(self._conn)
