"""The same-host shared-memory path: real shard servers write rows into the client's /dev/shm regions.

Every gather equals numpy fancy indexing; servers that cannot (or may not) see
the client's regions are detected by the probe and answered over gRPC; bad
targets are refused with errors naming the field; no region outlives its
client (closed, interpreter exit, killed, or a server killed mid-call).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from feature_shard_helpers import FEATURE_DIM, NUM_NODES, freeze, start_shards
from prometheus_client import REGISTRY

from saintpipe.core.errors import ConfigError
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.protos import feature_shard_pb2_grpc as pb_grpc
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.feature_shard import shm
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.launch import ShardProcess
from saintpipe.services.feature_shard.server import stop_server
from saintpipe.services.feature_shard.wire import encode_ids

ROOT = Path(__file__).resolve().parents[3]


def _leftovers(pid: int | None = None) -> list[str]:
    """Regions under /dev/shm created by process ``pid`` (default: this one)."""
    prefix = shm.region_prefix(pid)
    return sorted(n for n in os.listdir(shm.SHM_DIR) if n.startswith(prefix))


@pytest.fixture(scope="module")
def client(shard_addresses):
    with FeatureClient(shard_addresses, deadline=10.0, shared_memory="on") as c:
        yield c
    assert _leftovers() == []  # the last client of this module is closed: no region of this process is left


@pytest.fixture
def servers(feature_dataset):
    """Start extra in-process shard servers with given options; stopped after the test."""
    started = []

    def start(**options) -> list[list[str]]:
        servers, addresses = start_shards(feature_dataset, **options)
        started.extend(servers)
        return addresses

    yield start
    for server in started:
        stop_server(server, grace=0.5)


def _bytes_served(shard: str) -> float:
    return REGISTRY.get_sample_value("saintpipe_feature_bytes_total", {"shard": shard}) or 0.0


@pytest.mark.parametrize("seed", range(3))
def test_random_ids_with_duplicates_through_shared_memory(client, full_matrix, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, NUM_NODES, size=int(rng.integers(100, 4000)))
    before = client.stats()
    got = client.gather(ids)
    np.testing.assert_array_equal(got, full_matrix[ids])
    after = client.stats()
    assert after["bytes_received"] == before["bytes_received"]  # no row crossed the socket
    assert after["shm_bytes"] - before["shm_bytes"] == np.unique(ids).size * FEATURE_DIM * 4
    assert client.shared_memory_active and len(client.shared_memory_regions()) == 1  # reused across gathers


def test_boundaries_empty_single_and_sorted_unique(client, full_matrix):
    starts = [a for a, _ in client.shard_ranges][1:]
    ids = np.array([s + d for s in starts for d in (-2, -1, 0, 1)] + [0, NUM_NODES - 1])[::-1]
    np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
    assert client.gather(np.array([], dtype=np.int64)).shape == (0, FEATURE_DIM)
    for i in (0, 1000, NUM_NODES - 1):
        np.testing.assert_array_equal(client.gather(np.array([i])), full_matrix[[i]])
    node_ids = np.unique(np.random.default_rng(4).integers(0, NUM_NODES, 1200))  # a subgraph's node_ids
    np.testing.assert_array_equal(client.gather(node_ids), full_matrix[node_ids])
    np.testing.assert_array_equal(client.gather(np.arange(NUM_NODES)), full_matrix)


def test_server_counts_the_bytes_it_writes(client, full_matrix):
    before = _bytes_served("0")
    small = client.gather(np.array([3, 1, 2]))
    big_ids = np.random.default_rng(9).permutation(NUM_NODES)
    np.testing.assert_array_equal(client.gather(big_ids), full_matrix[big_ids])
    np.testing.assert_array_equal(small, full_matrix[[3, 1, 2]])
    start1 = client.shard_ranges[1][0]
    assert _bytes_served("0") - before == (3 + start1) * FEATURE_DIM * 4  # bytes written count as served


def test_float16_transfer_and_cache_through_shared_memory(shard_addresses, full_matrix):
    from saintpipe.services.feature_shard.cache import CacheConfig

    ids = np.random.default_rng(1).integers(0, NUM_NODES, 2000)
    with FeatureClient(shard_addresses, transfer_dtype="float16", shared_memory="on") as c16:
        np.testing.assert_array_equal(c16.gather(ids), full_matrix[ids].astype(np.float16).astype(np.float32))
        assert c16.stats()["shm_bytes"] == np.unique(ids).size * FEATURE_DIM * 2
    degrees = np.arange(NUM_NODES)
    cache = CacheConfig(static_rows=100, lru_rows=500)
    with FeatureClient(shard_addresses, cache=cache, degrees=degrees, shared_memory="on") as cached:
        for _ in range(2):  # a miss pass, then hits mixed with misses
            np.testing.assert_array_equal(cached.gather(ids), full_matrix[ids])
        assert cached.stats()["cache_hits"] > 0 and cached.stats()["shm_bytes"] > 0


def test_float16_store_through_shared_memory(tmp_path):
    arrays = generate_demo(num_nodes=400, feature_dim=8, seed=5)
    write_dataset(tmp_path / "half", num_shards=2, feature_dtype="float16", **arrays)
    servers, addresses = start_shards(tmp_path / "half")
    try:
        with FeatureClient(addresses, shared_memory="on") as c:
            ids = np.array([399, 0, 200, 199, 200, 7])
            expected = open_dataset(tmp_path / "half").features()[ids].astype(np.float32)
            np.testing.assert_array_equal(c.gather(ids), expected)
            assert c.stats()["shm_bytes"] == 5 * 8 * 2
    finally:
        for s in servers:
            stop_server(s, 0.5)


def test_servers_that_cannot_use_shared_memory_get_bytes(servers, shard_addresses, full_matrix, tmp_path):
    ids = np.random.default_rng(2).integers(0, NUM_NODES, 1500)
    disabled = servers(shared_memory=False)
    elsewhere = servers(
        shared_memory_dir=tmp_path
    )  # plays a server on another host: the probe region is missing
    for addresses, why in ((disabled, "disabled"), (elsewhere, "cannot open")):
        with FeatureClient(addresses, shared_memory="auto") as c:
            np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
            assert not c.shared_memory_active and c.stats()["shm_bytes"] == 0
            assert c.stats()["bytes_received"] == np.unique(ids).size * FEATURE_DIM * 4
            assert c.shared_memory_regions() == []  # the bytes path leases no region
        with pytest.raises(ConfigError, match=f"shared_memory='on', but feature shard 0 at .*{why}"):
            FeatureClient(addresses, shared_memory="on")
    # Mixed: shard 0 answers in bytes (written into the region by the client), shards 1 and 2 write directly.
    mixed = [disabled[0], *shard_addresses[1:]]
    with FeatureClient(mixed) as c:
        np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
        assert c.stats()["shm_bytes"] > 0 and c.stats()["bytes_received"] > 0
        names = c.shared_memory_regions()
    assert names and not any((shm.SHM_DIR / n).exists() for n in names)  # close() unlinked them


def _gather_shared(stub, ids, region: str, offset: int = shm.HEADER_BYTES, capacity: int = 1 << 20,
                   secret: bytes = b""):
    target = pb.SharedMemoryTarget(region=region, offset=offset, capacity=capacity, secret=secret)
    return stub.GatherUnary(
        pb.GatherRequest(ids=encode_ids(np.asarray(ids)), shared_memory=target), timeout=5
    )


def test_bad_targets_are_refused_with_the_field_named(shard_addresses, full_matrix):
    region = shm.Region(4096)
    try:
        with grpc.insecure_channel(shard_addresses[0][0]) as channel:
            stub = pb_grpc.FeatureShardStub(channel)

            def refused(match: str, *args, **kwargs) -> None:
                with pytest.raises(grpc.RpcError) as err:
                    _gather_shared(stub, *args, **kwargs)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert match in err.value.details(), err.value.details()

            for name in ("../etc/passwd", "psm_1234", shm.PREFIX + "a/b", "", shm.PREFIX):
                refused("GatherRequest.shared_memory.region", [1, 2], name)
            refused("not a saintpipe shared-memory region", [], "other")  # even for zero rows
            refused("cannot open /dev/shm/" + shm.PREFIX + "gone", [1], shm.PREFIX + "gone")
            refused(
                f"GatherRequest.shared_memory.capacity 95 bytes is too small for the answer: 1 rows x "
                f"{FEATURE_DIM} float32 = 96 bytes",
                [1],
                region.name,
                capacity=95,
                secret=region.secret,
            )
            refused(
                "holds 8192 bytes: too small for 4800 bytes at GatherRequest.shared_memory.offset 4096",
                np.arange(50),
                region.name,
                secret=region.secret,
            )
            refused(
                "too small for 96 bytes at GatherRequest.shared_memory.offset 8100",
                [1],
                region.name,
                offset=8100,
                secret=region.secret,
            )
            refused(  # the header (the secret, the probe's area) is never written
                "GatherRequest.shared_memory.offset 100 lies in region",
                [1],
                region.name,
                offset=100,
                secret=region.secret,
            )
            with pytest.raises(grpc.RpcError) as err:
                stub.ProbeSharedMemory(pb.SharedMemoryProbe(region="/etc/passwd", length=4), timeout=5)
            assert "SharedMemoryProbe.region" in err.value.details()

            # A good target at an offset: rows land there, the answer is metadata only.
            at = shm.HEADER_BYTES + 1000
            reply = _gather_shared(stub, [5, 3, 5], region.name, offset=at, capacity=288, secret=region.secret)
            assert reply.in_shared_memory and reply.rows == b"" and list(reply.shape) == [3, FEATURE_DIM]
            written = np.frombuffer(region.read(at, 288), dtype=np.float32).reshape(3, FEATURE_DIM)
            np.testing.assert_array_equal(written, full_matrix[[5, 3, 5]])
    finally:
        region.close()
    assert not region.path.exists()


def test_server_killed_mid_call_fails_over_and_leaks_nothing(feature_dataset, shard_addresses, full_matrix):
    replicas = [ShardProcess(feature_dataset, 0, wait=False) for _ in range(2)]
    try:
        for p in replicas:
            p.wait_ready()
        shards = [[p.address for p in replicas], *shard_addresses[1:]]
        ids = np.random.default_rng(3).integers(0, NUM_NODES, 2000)
        with FeatureClient(shards, deadline=10.0, shared_memory="on") as c:
            np.testing.assert_array_equal(c.gather(ids), full_matrix[ids])
            [used] = c.shared_memory_regions()
            victim = replicas[0]  # the preferred replica of shard 0
            freeze(victim.process)
            result: dict = {}
            call = threading.Thread(target=lambda: result.update(rows=c.gather(ids)))
            call.start()
            time.sleep(0.5)  # the call waits on the frozen replica
            victim.process.send_signal(signal.SIGKILL)
            call.join(15)
            np.testing.assert_array_equal(result["rows"], full_matrix[ids])  # answered by the other replica
            assert c.stats()["failovers"] >= 1
            # The region of the failed call was retired (the dead server might have written to it late).
            assert used not in c.shared_memory_regions() and not (shm.SHM_DIR / used).exists()
            np.testing.assert_array_equal(c.gather(ids[::-1]), full_matrix[ids[::-1]])
            [now] = c.shared_memory_regions()
        assert not (shm.SHM_DIR / now).exists()
    finally:
        for p in replicas:
            if p.process.poll() is None:
                os.kill(p.process.pid, signal.SIGCONT)
            p.stop(kill=True)


_CHILD = """
import os, signal, sys
import numpy as np
from saintpipe.services.feature_shard.client import FeatureClient
c = FeatureClient(sys.argv[1], shared_memory="on")
c.gather(np.arange(100))
print(os.getpid(), *c.shared_memory_regions(), flush=True)
if sys.argv[2] == "kill+tracker":  # as Ray does to a killed worker's children
    from multiprocessing import resource_tracker
    os.kill(resource_tracker._resource_tracker._pid, signal.SIGKILL)
if sys.argv[2].startswith("kill"):
    os.kill(os.getpid(), signal.SIGKILL)
"""  # "exit": ends without close(); the regions go at interpreter exit


def _run_child(addresses, how: str) -> tuple[int, list[str]]:
    spec = ";".join(",".join(r) for r in addresses)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, spec, how],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    pid, *names = proc.stdout.split()
    assert names and all(n.startswith(shm.region_prefix(int(pid))) for n in names), proc.stderr
    return int(pid), names


def _wait_gone(pid: int, seconds: float = 10.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while _leftovers(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _leftovers(pid)


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_regions_of_a_client_process_that_exits_or_dies_are_removed(shard_addresses, how):
    pid, _ = _run_child(shard_addresses, how)
    # On SIGKILL, multiprocessing's resource tracker (a process of its own) unlinks them when it sees the end.
    assert _wait_gone(pid) == []


def test_a_server_unlinks_the_regions_of_a_client_killed_with_its_tracker(feature_dataset):
    servers, addresses = start_shards(feature_dataset)
    try:
        pid, names = _run_child(addresses, "kill+tracker")
        time.sleep(0.5)  # the tracker is gone: nothing on the client's side cleans up
        assert _leftovers(pid) == names
    finally:
        for server in servers:
            stop_server(server, grace=0.5)  # sweeps its regions: the owner pid is dead
    assert _leftovers(pid) == []
