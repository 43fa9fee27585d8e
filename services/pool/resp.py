"""A lean pipelined round trip on a redis-py connection, for the pool's hot path.

redis-py's ``Pipeline`` costs about as much Python time as a loopback round
trip, and its command packer needs each argument as one buffer. The pool sends
a subgraph (about a megabyte, in pieces straight from its numpy arrays) and a
script call in one write and reads both replies, so it packs the commands here
and uses the connection's public send/read methods.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

# One argument: bytes-like, str, int, or a list of bytes-like pieces sent as one bulk string without joining.
Arg = bytes | bytearray | memoryview | str | int | float | list
_SMALL = 16 * 1024


def pack(*args: Arg) -> list:
    """RESP-encode one command; large buffers are passed through, small pieces coalesced."""
    out: list = []
    buf = bytearray(b"*%d\r\n" % len(args))
    for arg in args:
        if isinstance(arg, list):
            pieces: Sequence = arg
        elif isinstance(arg, (bytes, bytearray, memoryview)):
            pieces = (arg,)
        elif isinstance(arg, str):
            pieces = (arg.encode(),)
        else:
            pieces = (str(arg).encode(),)
        buf += b"$%d\r\n" % sum(memoryview(p).nbytes for p in pieces)
        for piece in pieces:
            if memoryview(piece).nbytes < _SMALL:
                buf += piece
            else:
                out.append(bytes(buf))
                out.append(piece)
                buf = bytearray()
        buf += b"\r\n"
    out.append(bytes(buf))
    return out


def roundtrip(client: redis.Redis, commands: Sequence[list]) -> list:
    """Send packed commands in one write on one pooled connection and return their replies.

    Every reply is read (keeping the connection in step) before the first error
    reply, if any, is raised. A connection-level failure drops the connection.
    """
    packed = [chunk for command in commands for chunk in command]
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        conn.send_packed_command(packed)
        replies: list = []
        error: Exception | None = None
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as exc:
                error = error or exc
                replies.append(exc)
        if error is not None:
            raise error
        return replies
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        conn.disconnect()
        raise
    finally:
        pool.release(conn)
