"""Blocking receives with a kernel timeout (bulk_socket): full, cut short by the peer, and past the deadline."""

from __future__ import annotations

import socket
import struct
import threading
import time

import numpy as np
import pytest

from saintpipe.services.feature_shard import bulk_socket as bs


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_timeval_never_zero_and_splits_seconds():
    assert struct.unpack("@ll", bs.timeval(0.0)) == (0, 1)  # zero would mean "block forever"
    assert struct.unpack("@ll", bs.timeval(-3.0)) == (0, 1)
    assert struct.unpack("@ll", bs.timeval(2.25)) == (2, 250_000)


def test_recv_all_fills_from_several_sends(pair):
    a, b = pair
    payload = np.random.default_rng(0).integers(0, 256, 3 << 20, dtype=np.uint8)

    def send():
        for lo in range(0, payload.size, 100_003):  # pieces unaligned to anything
            b.sendall(payload[lo:lo + 100_003].tobytes())
            time.sleep(0.001)

    sender = threading.Thread(target=send)
    sender.start()
    out = np.zeros_like(payload)
    bs.recv_all(a, memoryview(out), time.monotonic() + 30)
    sender.join()
    np.testing.assert_array_equal(out, payload)
    assert a.gettimeout() is None


def test_recv_all_raises_when_the_peer_closes_mid_way(pair):
    a, b = pair
    b.sendall(b"x" * 1000)
    b.close()
    with pytest.raises(ConnectionError, match="after 1000 of 4096 bytes"):
        bs.recv_all(a, memoryview(bytearray(4096)), time.monotonic() + 5)


def test_recv_all_stops_at_the_deadline_when_the_peer_stalls(pair):
    a, b = pair
    b.sendall(b"y" * 100)  # part of the answer, then nothing
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        bs.recv_all(a, memoryview(bytearray(1 << 20)), began + 0.3)
    elapsed = time.monotonic() - began
    assert 0.25 <= elapsed < 5.0
    # The receive timeout is cleared again: a later timeout-mode call is unaffected.
    assert struct.unpack("@ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)) == (0, 0)


def test_block_for_send_makes_the_socket_blocking_with_a_send_timeout(pair):
    a, _ = pair
    a.settimeout(5)
    bs.block_for_send(a, 0.2)
    assert a.gettimeout() is None
    assert struct.unpack("@ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, 16)) == (0, 200_000)
    with pytest.raises(OSError):  # nobody reads: the send gives up after the timeout instead of hanging
        a.sendall(b"z" * (64 << 20))
    assert bs.kernel_timeouts(a)
