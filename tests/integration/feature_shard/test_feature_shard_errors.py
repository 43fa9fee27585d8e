"""Bad requests get clear, typed errors; the server maps them to status codes in one place."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from feature_shard_helpers import FEATURE_DIM, NUM_NODES
from prometheus_client import REGISTRY

from saintpipe.core.errors import ConfigError, InvalidArgument, ServiceUnavailable
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.protos import feature_shard_pb2_grpc as pb_grpc
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.server import create_server
from saintpipe.services.feature_shard.wire import decode_chunk, encode_ids


@pytest.fixture(scope="module")
def stub(shard_addresses):
    """A plain generated stub on shard 1 (no client-side checks in the way)."""
    with grpc.insecure_channel(shard_addresses[1][0]) as channel:
        yield pb_grpc.FeatureShardStub(channel)


def _errors(shard: str, code: str) -> float:
    return REGISTRY.get_sample_value("saintpipe_feature_errors_total", {"shard": shard, "code": code}) or 0.0


def test_id_outside_the_shard_names_the_first_bad_id(stub):
    info = stub.Info(pb.InfoRequest(), timeout=5)
    before = _errors("1", "INVALID_ARGUMENT")
    ids = np.array([info.start, info.stop, info.stop + 5, info.start - 1])
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Gather(pb.GatherRequest(ids=encode_ids(ids)), timeout=5))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"node id {info.stop} (position 1" in err.value.details()
    assert f"[{info.start}, {info.stop})" in err.value.details()
    assert _errors("1", "INVALID_ARGUMENT") == before + 1


def test_malformed_and_unknown_fields_are_rejected(stub):
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Gather(pb.GatherRequest(ids=b"\x01\x02\x03"), timeout=5))
    # A malformed request is the caller's mistake: INVALID_ARGUMENT (DATA_LOSS is for answers the client cannot read).
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "GatherRequest.ids" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Gather(pb.GatherRequest(ids=b"", transfer_dtype="int8"), timeout=5))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "transfer_dtype" in err.value.details()


def test_empty_request_is_answered_with_zero_rows(stub):
    chunks = list(stub.Gather(pb.GatherRequest(ids=b""), timeout=5))
    assert len(chunks) == 1 and list(chunks[0].shape) == [0, FEATURE_DIM] and chunks[0].rows == b""
    # and the same bytes through the client's fast decoder
    offset, rows = decode_chunk(chunks[0].SerializeToString())
    assert offset == 0 and rows.shape == (0, FEATURE_DIM)


def test_gather_unary_answers_in_one_message_and_refuses_what_does_not_fit(
    stub, full_matrix, small_limit_addresses
):
    info = stub.Info(pb.InfoRequest(), timeout=5)
    ids = np.array([info.stop - 1, info.start, info.start + 7, info.start])  # any order, duplicates
    chunk = stub.GatherUnary(pb.GatherRequest(ids=encode_ids(ids)), timeout=5)
    offset, rows = decode_chunk(chunk.SerializeToString())
    assert offset == 0
    np.testing.assert_array_equal(rows, full_matrix[ids])
    empty = stub.GatherUnary(pb.GatherRequest(ids=b""), timeout=5)
    assert list(empty.shape) == [0, FEATURE_DIM] and empty.rows == b""
    # 100 rows x 96 bytes exceed a 4 KiB limit: refused with a pointer to the streaming call.
    with grpc.insecure_channel(small_limit_addresses[0][0]) as channel:
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.FeatureShardStub(channel).GatherUnary(
                pb.GatherRequest(ids=encode_ids(np.arange(100))), timeout=5
            )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "message limit of 4096" in err.value.details() and "ask Gather" in err.value.details()


def test_info_describes_the_shard(stub, feature_dataset):
    from saintpipe.services.dataset.store import open_dataset

    manifest = open_dataset(feature_dataset).manifest
    info = stub.Info(pb.InfoRequest(), timeout=5)
    assert (info.shard, info.num_shards, info.num_nodes) == (1, 3, NUM_NODES)
    assert (info.start, info.stop) == tuple(manifest.shards[1])
    assert (info.feature_dim, info.dtype) == (FEATURE_DIM, "float32")
    assert info.version == manifest.files["features/shard-00001.npy"] and info.dataset == "demo"


def test_client_rejects_bad_ids_before_calling(shard_addresses):
    with FeatureClient(shard_addresses) as client:
        with pytest.raises(InvalidArgument, match=rf"node id {NUM_NODES} \(position 2\)"):
            client.gather(np.array([0, 1, NUM_NODES, -1]))
        with pytest.raises(InvalidArgument, match="node id -1 .position 0"):
            client.gather(np.array([-1]))
        with pytest.raises(InvalidArgument, match="integers"):
            client.gather(np.array([1.5]))
        with pytest.raises(InvalidArgument, match="1-D"):
            client.gather(np.zeros((2, 2), dtype=np.int64))
        assert client.stats()["shard_calls"] == 0


def test_shards_listed_out_of_order_are_refused(shard_addresses):
    swapped = [shard_addresses[1], shard_addresses[0], shard_addresses[2]]
    with pytest.raises(InvalidArgument, match="says it is shard 1 of 3, but it is listed as shard 0"):
        FeatureClient(swapped)


def test_missing_shard_and_bad_addresses(shard_addresses):
    with pytest.raises(InvalidArgument, match="listed as shard 0 of 2"):
        FeatureClient(shard_addresses[:2])
    with pytest.raises(ConfigError, match="not a host:port"):
        FeatureClient([["localhost"]])
    with pytest.raises(ConfigError, match="address manifest not found"):
        FeatureClient("/nonexistent/shards.json")


def test_server_refuses_a_limit_below_one_row_and_a_taken_port(feature_dataset, shard_addresses):
    with pytest.raises(ConfigError, match="cannot hold one row"):
        create_server(feature_dataset, 0, max_message_bytes=64)
    taken = int(shard_addresses[0][0].rsplit(":", 1)[1])
    with pytest.raises(ServiceUnavailable, match="cannot listen"):
        create_server(feature_dataset, 0, port=taken)
