"""The bulk data plane against real shard servers on loopback: rows, security, errors, failover, restarts.

Each test starts its own servers with ``bulk_port=0`` and compares every
gather with the feature matrix. Hostile frames are sent on a raw socket.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest
from feature_shard_helpers import NUM_NODES, start_shards

from saintpipe.core.errors import ConfigError, InvalidArgument, ServiceUnavailable
from saintpipe.services.feature_shard import bulk_wire as bw
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.security import ClientSecurity, ServerSecurity
from saintpipe.services.feature_shard.server import _SERVICERS, stop_server
from tests.support.tls import make_pki

TOKEN = "bulk-plane-test-token-0123456789"
QUICK = dict(deadline=2.0, retry_deadline_s=1.0)


@pytest.fixture
def serve(feature_dataset):
    started = []

    def start(**kwargs) -> list[list[str]]:
        servers, addresses = start_shards(feature_dataset, bulk_port=0, **kwargs)
        started.extend(servers)
        return addresses

    yield start
    for server in started:
        stop_server(server, grace=0.5)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_rows_come_over_the_bulk_plane_in_request_order(serve, full_matrix):
    addresses = serve()
    rng = np.random.default_rng(0)
    cases = [
        rng.integers(0, NUM_NODES, 2500),  # any order, duplicates
        np.sort(rng.choice(NUM_NODES, 1800, replace=False)),  # sorted unique: received in place
        np.array([NUM_NODES - 1]),
        np.array([], dtype=np.int64),
    ]
    with FeatureClient(addresses, shared_memory="off") as client:
        for ids in cases:
            np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
        stats = client.stats()
        assert stats["bytes_received"] == sum(np.unique(i).size for i in cases) * full_matrix.shape[1] * 4
    with FeatureClient(addresses, shared_memory="off", transfer_dtype="float16") as client:
        ids = cases[0]
        np.testing.assert_array_equal(client.gather(ids), full_matrix[ids].astype(np.float16).astype(np.float32))
        assert client.stats()["bytes_received"] == np.unique(ids).size * full_matrix.shape[1] * 2
    with FeatureClient(addresses, shared_memory="off", bulk="off") as client:  # gRPC messages, same rows
        np.testing.assert_array_equal(client.gather(cases[0]), full_matrix[cases[0]])
    with pytest.raises(ConfigError, match="bulk must be one of"):
        FeatureClient(addresses, bulk="sometimes")


def test_info_advertises_the_bulk_port_and_shards_without_one_are_served_over_grpc(feature_dataset, full_matrix):
    with_bulk, plain = start_shards(feature_dataset, bulk_port=0), start_shards(feature_dataset)
    try:
        ports = [_SERVICERS[s].info.bulk_port for s in with_bulk[0]]
        assert all(p > 0 for p in ports) and len(set(ports)) == len(ports)
        assert all(_SERVICERS[s].info.bulk_port == 0 for s in plain[0])
        mixed = [with_bulk[1][0], plain[1][1], with_bulk[1][2]]
        ids = np.arange(0, NUM_NODES, 3)
        with FeatureClient(mixed, shared_memory="off") as client:
            np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
            channels = [r.bulk for s in client._shards for r in s.replicas]
            assert channels[0] is not None and channels[1] is None and channels[2] is not None
    finally:
        for server in with_bulk[0] + plain[0]:
            stop_server(server, grace=0.5)


def _raw(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _closed(conn: socket.socket) -> bool:
    """Whether the server closed the connection (a reset when our unread bytes were still in its buffer)."""
    try:
        return conn.recv(100) == b""
    except ConnectionResetError:
        return True


def _reply(conn: socket.socket) -> tuple[int, str]:
    head = b""
    while len(head) < bw.REPLY_HEAD.size:
        more = conn.recv(bw.REPLY_HEAD.size - len(head))
        assert more, "the server closed without a reply"
        head += more
    status, _, rows, _, length = bw.parse_reply_head(head)
    message = b""
    while len(message) < length:
        message += conn.recv(length - len(message))
    return status, message.decode()


def test_hostile_frames_get_a_named_refusal_and_the_server_keeps_serving(serve, full_matrix):
    addresses = serve(max_message_bytes=1 << 16)
    port = next(s.info.bulk_port for s in _SERVICERS.values()
                if s.info.bulk_port and s.shard == 0 and s.max_message_bytes == 1 << 16)
    with _raw(port) as conn:  # not our protocol at all
        conn.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert _reply(conn) == (bw.INVALID_ARGUMENT,
                                "not a bulk gather request (starts with b'GET ', expected b'SPB1')")
        assert _closed(conn)  # framing lost: closed
    with _raw(port) as conn:  # a count far over the limit: refused before anything is allocated for it
        conn.sendall(bw.REQUEST_MAGIC + bytes(8) + (2**62).to_bytes(8, "little"))
        status, message = _reply(conn)
        assert status == bw.INVALID_ARGUMENT and "exceeds this server's limit of 8192 per request" in message
    with _raw(port) as conn:  # an id of another shard: named; the connection stays usable
        for piece in bw.encode_request(np.array([NUM_NODES - 1]), float16=False, token=None):
            conn.sendall(piece)
        status, message = _reply(conn)
        assert status == bw.INVALID_ARGUMENT and f"node id {NUM_NODES - 1} (position 0 of the request)" in message
        for piece in bw.encode_request(np.array([0, 1]), float16=False, token=None):
            conn.sendall(piece)
        assert _reply(conn)[0] == bw.OK
    with FeatureClient(addresses, shared_memory="off") as client:
        np.testing.assert_array_equal(client.gather(np.arange(50)), full_matrix[:50])
        with pytest.raises(InvalidArgument, match=f"node id {NUM_NODES}"):
            client.gather(np.array([NUM_NODES]))


def test_the_bulk_plane_requires_the_token_and_speaks_tls_like_the_grpc_port(serve, pki, full_matrix, tmp_path):
    addresses = serve(security=ServerSecurity(token=TOKEN, tls_cert=pki.server_cert, tls_key=pki.server_key,
                                              tls_client_ca=pki.ca_cert))
    port = next(s.info.bulk_port for s in _SERVICERS.values() if s.info.bulk_port and s.shard == 0)
    with _raw(port) as conn:  # plaintext to a TLS port: the handshake fails, the server closes
        for piece in bw.encode_request(np.array([0]), float16=False, token=TOKEN):
            conn.sendall(piece)
        assert _closed(conn)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    good = ClientSecurity(tls_ca=pki.ca_cert, tls_cert=pki.client_cert, tls_key=pki.client_key,
                          token_file=token_file)
    ids = np.random.default_rng(1).integers(0, NUM_NODES, 900)
    with FeatureClient(addresses, shared_memory="off", security=good) as client:
        np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
        assert client.stats()["bytes_received"] > 0
        assert all(r.bulk is not None for s in client._shards for r in s.replicas)
        # The same client with another token: the bulk plane refuses it (the gRPC Info already passed).
        for shard in client._shards:
            for replica in shard.replicas:
                replica.bulk._security = type(replica.bulk._security)(
                    *[getattr(replica.bulk._security, f) for f in ("credentials", "options", "metadata",
                                                                    "has_token", "ssl_context", "server_name")],
                    "wrong-token-0123456789")
                replica.bulk.close()
                replica.bulk._closed = False
        with pytest.raises(ConfigError, match="refused our token .UNAUTHENTICATED."):
            client.gather(ids)


def test_a_stopped_replica_fails_over_to_the_next_and_with_none_left_the_shard_is_unavailable(feature_dataset,
                                                                                        full_matrix):
    first = start_shards(feature_dataset, bulk_port=0)
    second = start_shards(feature_dataset, bulk_port=0)
    try:
        addresses = [[a[0], b[0]] for a, b in zip(first[1], second[1])]
        ids = np.arange(0, NUM_NODES, 2)
        with FeatureClient(addresses, shared_memory="off", **QUICK) as client:
            np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
            for server in first[0]:
                stop_server(server, grace=0.1)
            np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])  # the second replicas answer
            assert client.stats()["failovers"] >= 1
            for server in second[0]:
                stop_server(server, grace=0.1)
            with pytest.raises(ServiceUnavailable, match=r"feature shard \d .*no replica answered Gather"):
                client.gather(ids)
    finally:
        for server in first[0] + second[0]:
            stop_server(server, grace=0.1)
