"""Concurrent clients, a client shared by threads, and graceful shutdown with a call in flight."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import numpy as np
import pytest
from feature_shard_helpers import NUM_NODES

from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.server import create_server, stop_server
from saintpipe.services.feature_shard.wire import SERVICE_NAME, decode_chunk, encode_ids


def test_concurrent_clients_and_a_shared_client(shard_addresses, full_matrix):
    shared = FeatureClient(shard_addresses)

    def work(seed: int) -> int:
        rng = np.random.default_rng(seed)
        own = FeatureClient(shard_addresses) if seed % 2 else None
        try:
            for _ in range(8):
                ids = rng.integers(0, NUM_NODES, int(rng.integers(1, 1500)))
                for client in filter(None, (shared, own)):
                    np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
        finally:
            if own is not None:
                own.close()
        return seed

    try:
        with futures.ThreadPoolExecutor(6) as pool:
            assert sorted(pool.map(work, range(6))) == list(range(6))
        assert shared.stats()["requests"] == 6 * 8
    finally:
        shared.close()


@pytest.mark.parametrize("grace", [10.0, 0.0])
def test_graceful_shutdown_lets_the_call_in_flight_finish(feature_dataset, full_matrix, grace):
    # A 29 MB answer in 4 KiB chunks: far more than the socket buffers and flow-control
    # window hold, so the call is still streaming when the stop begins.
    server, port = create_server(feature_dataset, 0, chunk_bytes=4096)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", -1)])
    gather = channel.unary_stream(
        f"/{SERVICE_NAME}/Gather",
        request_serializer=pb.GatherRequest.SerializeToString,
        response_deserializer=decode_chunk,
    )
    ids = np.tile(np.arange(1000), 300)
    stream = gather(pb.GatherRequest(ids=encode_ids(ids)), timeout=30)
    first_offset, first_rows = next(stream)  # the call is now in flight
    stopper = threading.Thread(target=stop_server, args=(server, grace))
    stopper.start()
    try:
        rows = {first_offset: first_rows}
        if grace == 0:  # the control: without grace the call in flight is cut off
            with pytest.raises(grpc.RpcError):
                for offset, chunk in stream:
                    rows[offset] = chunk
            return
        for offset, chunk in stream:
            rows[offset] = chunk
        got = np.concatenate([rows[k] for k in sorted(rows)])
        np.testing.assert_array_equal(got, full_matrix[ids])
    finally:
        stopper.join(30)
        assert not stopper.is_alive()
        channel.close()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as again:  # after the stop nothing new is accepted
        with pytest.raises(grpc.RpcError) as err:
            again.unary_unary(f"/{SERVICE_NAME}/Info")(b"", timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
