"""A second network host on this machine: a namespace joined by a veth pair, reachable, and gone afterwards."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from saintpipe.core.netns import VethHost, netns_unavailable

pytestmark = pytest.mark.skipif(netns_unavailable() is not None, reason=f"no namespaces: {netns_unavailable()}")

_ECHO = """
import socket, sys
s = socket.create_server((sys.argv[1], 0)); print(s.getsockname()[1], flush=True)
c, peer = s.accept(); c.sendall(peer[0].encode()); c.close()
"""


def test_a_server_in_the_namespace_is_reached_over_the_veth_pair_and_sees_our_peer_address():
    with VethHost(prefix="tst", index=4001) as host:
        assert host.address != host.peer_address
        server = subprocess.Popen(host.command([sys.executable, "-c", _ECHO, host.address]), stdout=subprocess.PIPE,
                                  text=True)
        try:
            port = int(server.stdout.readline())
            with socket.create_connection((host.address, port), timeout=10) as conn:
                assert conn.recv(64).decode() == host.peer_address  # it came over the link, not loopback
            # The namespace has its own loopback: our 127.0.0.1 is not its 127.0.0.1.
            inside = subprocess.run(host.command(["ip", "-o", "addr"]), capture_output=True, text=True).stdout
            assert host.address in inside and host.peer_address not in inside
        finally:
            server.kill()
            server.wait()
        name = host.namespace
    assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
