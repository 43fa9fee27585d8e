"""A shard writes only into shared-memory regions the requesting client registered (holds the secret of).

Region names are not secret (``ls /dev/shm``): a request that names another
client's region without that region's secret, or with a wrong one, is
refused before anything is written, and the region's bytes stay exactly as
they were; the probe (which writes too) is held to the same rule; with the
right secret the rows land after the header.
"""

from __future__ import annotations

import os
import secrets

import grpc
import numpy as np
import pytest
from feature_shard_helpers import FEATURE_DIM, NUM_NODES

from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.protos import feature_shard_pb2_grpc as pb_grpc
from saintpipe.services.feature_shard import shm
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.wire import encode_ids

ROW_BYTES = FEATURE_DIM * 4


@pytest.fixture
def victim(shard_addresses):
    """A client that gathered through shared memory: its region (name, path) holds rows and its secret."""
    with FeatureClient(shard_addresses, shared_memory="on") as client:
        client.gather(np.random.default_rng(0).integers(0, NUM_NODES, 500))
        [name] = client.shared_memory_regions()
        yield name, shm.SHM_DIR / name


def _target(name: str, secret: bytes, offset: int = shm.HEADER_BYTES) -> pb.GatherRequest:
    target = pb.SharedMemoryTarget(region=name, offset=offset, capacity=1 << 20, secret=secret)
    return pb.GatherRequest(ids=encode_ids(np.array([7, 3, 7])), shared_memory=target)


def test_a_request_without_the_regions_secret_writes_nothing(shard_addresses, victim):
    name, path = victim
    before = path.read_bytes()
    with grpc.insecure_channel(shard_addresses[0][0]) as channel:
        stub = pb_grpc.FeatureShardStub(channel)
        for secret in (b"", secrets.token_bytes(shm.SECRET_BYTES), before[shm.SECRET_AT : shm.SECRET_AT + 31]):
            for offset in (shm.HEADER_BYTES, 0):  # rows, or the header itself (where the secret lies)
                for call in (stub.GatherUnary, lambda r, timeout: list(stub.Gather(r, timeout=timeout))):
                    with pytest.raises(grpc.RpcError) as err:
                        call(_target(name, secret, offset), timeout=5)
                    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                    assert err.value.details() == (
                        f"GatherRequest.shared_memory.secret does not match region {name!r}'s: not a region this "
                        "client registered"
                    )
            # The probe writes too (the token reversed): not without the secret either.
            reply = stub.ProbeSharedMemory(pb.SharedMemoryProbe(region=name, length=16, secret=secret), timeout=5)
            assert not reply.readable and reply.token == b""
            assert "SharedMemoryProbe.secret does not match region" in reply.detail
    assert path.read_bytes() == before  # not one byte changed


def test_with_the_right_secret_rows_land_after_the_header(shard_addresses, victim, full_matrix):
    name, path = victim
    secret = path.read_bytes()[shm.SECRET_AT : shm.SECRET_AT + shm.SECRET_BYTES]  # the owner's (our uid) to read
    at = shm.HEADER_BYTES + 10 * ROW_BYTES
    with grpc.insecure_channel(shard_addresses[0][0]) as channel:
        reply = pb_grpc.FeatureShardStub(channel).GatherUnary(_target(name, secret, at), timeout=5)
    assert reply.in_shared_memory and list(reply.shape) == [3, FEATURE_DIM]
    data = path.read_bytes()
    rows = np.frombuffer(data[at : at + 3 * ROW_BYTES], dtype=np.float32).reshape(3, FEATURE_DIM)
    np.testing.assert_array_equal(rows, full_matrix[[7, 3, 7]])
    assert data[shm.SECRET_AT : shm.SECRET_AT + shm.SECRET_BYTES] == secret


def test_two_clients_each_write_only_their_own_regions(shard_addresses, full_matrix):
    ids = np.random.default_rng(1).integers(0, NUM_NODES, 800)
    a, b = (FeatureClient(shard_addresses, shared_memory="on") for _ in range(2))
    with a, b:
        np.testing.assert_array_equal(a.gather(ids), full_matrix[ids])
        np.testing.assert_array_equal(b.gather(ids[::-1]), full_matrix[ids[::-1]])
        [region_a], [region_b] = a.shared_memory_regions(), b.shared_memory_regions()
        header_a = (shm.SHM_DIR / region_a).read_bytes()[: shm.HEADER_BYTES]
        header_b = (shm.SHM_DIR / region_b).read_bytes()[: shm.HEADER_BYTES]
        secret_a = header_a[shm.SECRET_AT : shm.SECRET_AT + shm.SECRET_BYTES]
        assert secret_a != header_b[shm.SECRET_AT : shm.SECRET_AT + shm.SECRET_BYTES]
        # B's secret does not open A's region.
        with grpc.insecure_channel(shard_addresses[0][0]) as channel:
            with pytest.raises(grpc.RpcError) as err:
                pb_grpc.FeatureShardStub(channel).GatherUnary(
                    _target(region_a, header_b[shm.SECRET_AT : shm.SECRET_AT + shm.SECRET_BYTES]), timeout=5
                )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a region this client registered" in err.value.details()
        assert (shm.SHM_DIR / region_a).read_bytes()[: shm.HEADER_BYTES] == header_a


def test_a_file_nobody_registered_is_refused_even_with_its_zero_secret(shard_addresses):
    # A file of the right name that no client wrote a secret into (all zeros): zeros do not open it.
    path = shm.SHM_DIR / f"{shm.region_name()}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, 2 * shm.HEADER_BYTES)
        with grpc.insecure_channel(shard_addresses[0][0]) as channel:
            with pytest.raises(grpc.RpcError) as err:
                pb_grpc.FeatureShardStub(channel).GatherUnary(
                    _target(path.name, bytes(shm.SECRET_BYTES)), timeout=5
                )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a region this client registered" in err.value.details()
        assert path.read_bytes() == bytes(2 * shm.HEADER_BYTES)
    finally:
        os.close(fd)
        path.unlink()
