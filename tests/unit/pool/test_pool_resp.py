"""The pool's RESP packing and reply reader, over a local socket pair fed in awkward pieces."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
import redis

from saintpipe.services.pool.resp import BIG_BULK, pack, raise_first_error, receive


class FakeConnection:
    """The two things ``receive`` uses of a redis-py connection."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.disconnected = False

    def disconnect(self) -> None:
        self.disconnected = True


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.settimeout(5)
    yield FakeConnection(a), b
    a.close()
    b.close()


def feed(sock: socket.socket, data: bytes, piece: int) -> threading.Thread:
    """Send ``data`` in pieces of ``piece`` bytes from a thread (so big replies do not block the test)."""

    def run() -> None:
        for i in range(0, len(data), piece):
            sock.sendall(data[i : i + piece])

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_pack_is_resp_with_pieces_passed_through():
    big = np.arange(BIG_BULK, dtype=np.uint8)
    chunks = pack("SET", "k", [b"ab", memoryview(big), memoryview(np.arange(2, dtype=np.int32))], "PX", 5)
    assert np.shares_memory(np.frombuffer(chunks[2], dtype=np.uint8), big)  # not copied
    assert all(len(c) == memoryview(c).nbytes for c in chunks)  # len() counts bytes, as sendmsg does
    joined = b"".join(bytes(c) for c in chunks)
    head = b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\nab" % (BIG_BULK + 10)
    assert joined.startswith(head)
    assert joined.endswith(b"\r\n$2\r\nPX\r\n$1\r\n5\r\n")
    assert pack("GET", b"x") == [b"*2\r\n$3\r\nGET\r\n$1\r\nx\r\n"]


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
def test_replies_of_every_kind_read_in_any_fragmentation(pair, piece):
    conn, peer = pair
    big = bytes(range(256)) * (BIG_BULK // 128)  # two BIG_BULKs: read straight into its own buffer
    mid = b"m" * (BIG_BULK - 1)  # read through the reader's own buffer, which must grow for it
    replies = b"".join(
        [
            b"+OK\r\n",
            b":-42\r\n",
            b"$5\r\nhello\r\n",
            b"$-1\r\n",
            b"_\r\n",  # RESP3 null
            b"*3\r\n$1\r\na\r\n:7\r\n*-1\r\n",
            b"%1\r\n$1\r\nk\r\n*1\r\n$1\r\nv\r\n",  # RESP3 map
            b"#t\r\n,1.5\r\n",
            b"-NOSCRIPT No matching script\r\n",
            b"$%d\r\n" % len(big) + big + b"\r\n",
            b"$%d\r\n" % len(mid) + mid + b"\r\n",
            b"$0\r\n\r\n",
        ]
    )
    thread = feed(peer, replies, piece)
    got = receive(conn, 13)
    thread.join()
    assert got[:8] == [b"OK", -42, b"hello", None, None, [b"a", 7, None], {b"k": [b"v"]}, True]
    assert got[8] == 1.5
    assert isinstance(got[9], redis.exceptions.NoScriptError)
    assert bytes(got[10]) == big and isinstance(got[10], memoryview) and not got[10].readonly
    assert bytes(got[11]) == mid and isinstance(got[11], bytes)
    assert got[12] == b""
    assert not conn.disconnected


def test_error_replies_are_raised_after_every_reply_is_read(pair):
    conn, peer = pair
    peer.sendall(b"-LOADING Redis is loading\r\n:1\r\n")
    replies = receive(conn, 2)
    assert replies[1] == 1
    with pytest.raises(redis.exceptions.BusyLoadingError):  # a ConnectionError: the pool retries it
        raise_first_error(replies)


def test_a_closed_connection_or_garbage_drops_the_connection(pair):
    conn, peer = pair
    peer.sendall(b"$10\r\nabc")
    peer.close()
    with pytest.raises(redis.ConnectionError, match="closed"):
        receive(conn, 1)
    assert conn.disconnected


def test_unknown_reply_types_and_extra_replies_are_refused():
    for data, count, match in ((b"?what\r\n", 1, "unexpected reply"), (b":1\r\n:2\r\n", 1, "more replies")):
        a, b = socket.socketpair()
        conn = FakeConnection(a)
        b.sendall(data)
        with pytest.raises(redis.ConnectionError, match=match):
            receive(conn, count)
        assert conn.disconnected
        a.close()
        b.close()
