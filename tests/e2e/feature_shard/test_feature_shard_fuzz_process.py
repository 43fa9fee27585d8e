"""``saintpipe serve feature-shard`` as a real process, fed garbage: its answers are INVALID_ARGUMENT (or
OK), it keeps serving, and its stderr (the log a user sees) holds a line or two, no traceback."""

from __future__ import annotations

import random

import grpc
import numpy as np
import pytest

from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.feature_shard.launch import ShardProcess
from saintpipe.services.feature_shard.wire import SERVICE_NAME, decode_chunk, encode_ids

pytestmark = pytest.mark.faults  # part of the fault suite (docs/how-to/faults.md)


SEED = 11
PER_METHOD = 200


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz") / "demo"
    write_dataset(out, num_shards=2, **generate_demo(num_nodes=500, feature_dim=8, seed=1))
    return out


def _payloads(rng: random.Random, seeds: list[bytes]) -> list[bytes]:
    out = []
    for _ in range(PER_METHOD):
        data = bytearray(rng.choice(seeds))
        if rng.random() < 0.3 or not data:
            data = bytearray(rng.getrandbits(8) for _ in range(rng.randrange(1, 60)))
        else:
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.getrandbits(8)
            if rng.random() < 0.3:
                del data[rng.randrange(len(data)) :]
        out.append(bytes(data))
    return out


def test_a_served_shard_answers_garbage_without_flooding_its_log(dataset):
    start, stop = open_dataset(dataset).manifest.shards[1]
    ids = encode_ids(np.array([start, stop - 1]))
    region = "saintpipe-features-0-1-cafe"
    seeds = {
        "Gather": [pb.GatherRequest(ids=ids, transfer_dtype="float16").SerializeToString()],
        "GatherUnary": [
            pb.GatherRequest(
                ids=ids, shared_memory=pb.SharedMemoryTarget(region=region, capacity=64)
            ).SerializeToString()
        ],
        "Info": [b"\x08\x01"],
        "ProbeSharedMemory": [pb.SharedMemoryProbe(region=region, length=16).SerializeToString()],
    }
    rng = random.Random(SEED)
    server = ShardProcess(dataset, 1)
    try:
        with grpc.insecure_channel(server.address) as channel:
            for method, method_seeds in seeds.items():
                path = f"/{SERVICE_NAME}/{method}"
                for payload in _payloads(rng, method_seeds):
                    try:
                        if method == "Gather":
                            list(channel.unary_stream(path)(payload, timeout=10))
                        else:
                            channel.unary_unary(path)(payload, timeout=10)
                    except grpc.RpcError as exc:
                        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (
                            method,
                            payload,
                            exc.details(),
                        )
            answer = channel.unary_unary(f"/{SERVICE_NAME}/GatherUnary")(
                pb.GatherRequest(ids=ids).SerializeToString(), timeout=10
            )
        expected = np.asarray(open_dataset(dataset).features())[[start, stop - 1]]
        np.testing.assert_array_equal(decode_chunk(answer)[1], expected)
        assert server.process.poll() is None
    finally:
        server.stop()
    log = server.stderr()
    lines = [line for line in log.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 3, log
    assert "Traceback" not in log and "INVALID_ARGUMENT" in lines[0]
