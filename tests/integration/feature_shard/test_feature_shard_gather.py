"""Every gather equals numpy fancy indexing of the full feature matrix."""

from __future__ import annotations

import json

import numpy as np
import pytest
from feature_shard_helpers import NUM_NODES, start_shards

from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.server import stop_server


@pytest.fixture(scope="module")
def client(shard_addresses):
    with FeatureClient(shard_addresses, deadline=10.0) as c:
        yield c


@pytest.mark.parametrize("seed", range(6))
def test_random_ids_with_duplicates(client, full_matrix, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, NUM_NODES, size=int(rng.integers(1, 4000)))  # duplicates certain above ~70 ids
    got = client.gather(ids)
    assert got.dtype == np.float32 and got.shape == (ids.size, full_matrix.shape[1])
    np.testing.assert_array_equal(got, full_matrix[ids])


def test_ids_straddling_every_shard_boundary(client, full_matrix):
    starts = [a for a, _ in client.shard_ranges][1:]
    ids = np.array([s + d for s in starts for d in (-2, -1, 0, 1)] + [0, NUM_NODES - 1])[::-1]
    np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])


def test_empty_and_single(client, full_matrix):
    assert client.gather(np.array([], dtype=np.int64)).shape == (0, full_matrix.shape[1])
    for i in (0, 1000, NUM_NODES - 1):
        np.testing.assert_array_equal(client.gather(np.array([i])), full_matrix[[i]])


def test_all_duplicates_and_other_int_dtypes(client, full_matrix):
    ids = np.full(50, 2999, dtype=np.int32)
    np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
    before = client.stats()["rows_fetched"]
    client.gather(ids)
    assert client.stats()["rows_fetched"] - before == 1  # fetched once, copied 50 times


def test_response_larger_than_message_limit_is_chunked(small_limit_addresses, full_matrix):
    ids = np.random.default_rng(7).permutation(NUM_NODES)  # 3001 x 96 bytes >> 4 KiB per message
    with FeatureClient(small_limit_addresses) as c:
        np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
        # The request (8 bytes per id) exceeds the limit too: the client split it into several calls.
        assert c.stats()["shard_calls"] > 3


def test_float16_transfer_halves_bytes(shard_addresses, full_matrix):
    ids = np.random.default_rng(1).integers(0, NUM_NODES, 2000)
    with (
        FeatureClient(shard_addresses) as c32,
        FeatureClient(shard_addresses, transfer_dtype="float16") as c16,
    ):
        exact = c32.gather(ids)
        half = c16.gather(ids)
        assert half.dtype == np.float32
        np.testing.assert_array_equal(half, full_matrix[ids].astype(np.float16).astype(np.float32))
        assert not np.array_equal(half, exact)  # really went through float16
        assert c16.stats()["bytes_received"] * 2 == c32.stats()["bytes_received"]


def test_float16_store_is_served_as_stored(tmp_path):
    arrays = generate_demo(num_nodes=400, feature_dim=8, seed=5)
    write_dataset(tmp_path / "half", num_shards=2, feature_dtype="float16", **arrays)
    servers, addresses = start_shards(tmp_path / "half")
    try:
        with FeatureClient(addresses) as c:
            assert c.stored_dtype == "float16"
            ids = np.arange(399, -1, -3)
            expected = open_dataset(tmp_path / "half").features()[ids].astype(np.float32)
            np.testing.assert_array_equal(c.gather(ids), expected)
    finally:
        for s in servers:
            stop_server(s, 0.5)


def test_address_manifest_and_string_forms(shard_addresses, full_matrix, tmp_path):
    manifest = tmp_path / "shards.json"
    manifest.write_text(json.dumps({"shards": shard_addresses}))
    text = ";".join(",".join(r) for r in shard_addresses)
    ids = np.array([5, 1500, 2900, 5])
    for spec in (manifest, str(manifest), text):
        with FeatureClient(spec) as c:
            np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])


def test_sorted_unique_ids_like_a_subgraph(client, full_matrix):
    node_ids = np.unique(
        np.random.default_rng(4).integers(0, NUM_NODES, 1200)
    )  # Subgraph.node_ids convention
    np.testing.assert_array_equal(client.gather(node_ids), full_matrix[node_ids])
    np.testing.assert_array_equal(client.gather(np.arange(NUM_NODES)), full_matrix)


def test_server_without_gather_unary_is_streamed_from(feature_dataset, full_matrix):
    # A shard server of the version before GatherUnary: the client falls back to the stream.
    from concurrent import futures

    import grpc

    from saintpipe.protos import feature_shard_pb2 as pb
    from saintpipe.services.feature_shard.server import FeatureShardServicer
    from saintpipe.services.feature_shard.wire import SERVICE_NAME

    servers, addresses = [], []
    for k in range(open_dataset(feature_dataset).manifest.num_shards):
        servicer = FeatureShardServicer(feature_dataset, k)
        handlers = {
            "Gather": grpc.unary_stream_rpc_method_handler(
                servicer.Gather, request_deserializer=pb.GatherRequest.FromString
            ),
            "Info": grpc.unary_unary_rpc_method_handler(
                servicer.Info,
                request_deserializer=pb.InfoRequest.FromString,
                response_serializer=pb.ShardInfo.SerializeToString,
            ),
        }
        server = grpc.server(futures.ThreadPoolExecutor(2))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        addresses.append([f"127.0.0.1:{port}"])
    try:
        ids = np.random.default_rng(4).integers(0, NUM_NODES, 3000)
        with FeatureClient(addresses) as c:
            np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
            np.testing.assert_array_equal(c.gather(ids[::-1]), full_matrix[ids[::-1]])
            assert c.stats()["shard_calls"] == 6 and c.stats()["failovers"] == 0
    finally:
        for server in servers:
            server.stop(None)
