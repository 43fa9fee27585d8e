"""Shared-memory leftovers of a process killed with SIGKILL: found and removed by ``saintpipe doctor``, and by
the next producer or feature client to start; a live process's files are never touched.

A child process writes a pool slot (a real SubgraphPool put on a real Redis) and
a feature region (a real FeatureClient gather from a real shard server) into a
private shared-memory directory, then is killed with its whole process group
(its resource tracker too), as a user's SIGKILL of ``saintpipe run`` does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.store import write_dataset
from saintpipe.services.feature_shard import shm
from saintpipe.services.feature_shard.client import FeatureClient
from saintpipe.services.feature_shard.server import create_server, stop_server
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.synthetic import random_subgraph

from saintpipe.core import shm_owners
from tests.support.cli import ROOT, run_cli

_CHILD = r"""
import os, sys, time
from pathlib import Path
import numpy as np
from saintpipe.services.pool import shared_memory
from saintpipe.services.feature_shard import shm
shared_memory.SHM_DIR = shm.SHM_DIR = Path(sys.argv[1])
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.synthetic import random_subgraph
from saintpipe.services.feature_shard.client import FeatureClient
pool = SubgraphPool(sys.argv[2], sys.argv[3], transport="shared_memory")
pool.put(random_subgraph(50, 200, seed=1, job_id=sys.argv[3]))
client = FeatureClient(sys.argv[4], shared_memory="on")
client.gather(np.arange(100))
print(os.getpid(), flush=True)
time.sleep(600)
"""


def sg(job: str, seed: int = 0):
    return random_subgraph(50, 200, seed=seed, job_id=job)


@pytest.fixture
def shard(tmp_path, shm_dir):
    """One real shard server that writes rows into regions of ``shm_dir``; its address spec."""
    data = tmp_path / "data"
    write_dataset(data, num_shards=1, **generate_demo(num_nodes=400, feature_dim=8, seed=0))
    server, port = create_server(data, 0, shared_memory_dir=shm_dir)
    yield f"127.0.0.1:{port}"
    stop_server(server, grace=0.5)


def killed_child(shm_dir: Path, url: str, job: str, shards: str) -> int:
    """Run the child until it has written its slot and region, SIGKILL its process group; its pid."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(shm_dir), url, job, shards],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    try:
        line = child.stdout.readline()
        assert line.strip() == str(child.pid), child.stderr.read() if child.poll() is not None else line
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the child and its resource tracker, which would clean up
        child.wait(timeout=30)
        child.stdout.close()
        child.stderr.close()
    return child.pid


def files_of(shm_dir: Path, pid: int) -> dict[str, str]:
    """kind -> name of the files that process ``pid`` made."""
    found = shm_owners.scan(shm_dir, [*shared_memory.KINDS, *shm.KINDS])
    return {f.kind: f.name for f in found if f.owner is not None and f.owner.pid == pid}


def test_doctor_lists_and_cleans_a_killed_processes_files_and_never_a_live_ones(redis_server, shm_dir, shard):
    pid = killed_child(shm_dir, redis_server.url, "first", shard)
    dead = files_of(shm_dir, pid)
    assert set(dead) == {"pool slot", "feature region"}
    # This process lives, with a slot and a region of its own.
    writer = shared_memory.SlotWriter(redis_server.url, "live", directory=shm_dir)
    writer.write(lambda allocate: (allocate(4), 4)[1])
    region = shm.Region(4096, shm_dir)
    live = files_of(shm_dir, os.getpid())
    assert set(live) == {"pool slot", "feature region"}

    report = json.loads(run_cli("doctor", "--shm-dir", str(shm_dir), "--json").stdout)
    by_name = {f["name"]: f for f in report["files"]}
    for name in dead.values():
        assert (by_name[name]["owner"], by_name[name]["leftover"], by_name[name]["owner_pid"]) == ("dead", True, pid)
    for name in live.values():
        assert (by_name[name]["owner"], by_name[name]["leftover"]) == ("alive", False)
    assert report["removed"] == [] and all((shm_dir / n).exists() for n in dead.values())

    table = run_cli("doctor", "--shm-dir", str(shm_dir)).stdout
    assert all(f"dead: leftover  {name}" in table for name in dead.values()), table

    cleaned = run_cli("doctor", "--shm-dir", str(shm_dir), "--clean").stdout
    sizes = sum(by_name[n]["size"] for n in dead.values())
    assert f"freed {sizes} bytes" in cleaned and sizes > 0
    assert all(f"removed {shm_dir / name}" in cleaned for name in dead.values())
    assert not any((shm_dir / n).exists() for n in dead.values())
    assert all((shm_dir / n).exists() for n in live.values())
    assert (shm_dir / "saintpipe-pool-namespace").exists()
    writer.close()
    region.close()


def test_the_next_producer_and_feature_client_remove_a_killed_processes_files(redis_server, shm_dir, shard,
                                                                              monkeypatch):
    monkeypatch.setattr(shm, "SHM_DIR", shm_dir)
    pid = killed_child(shm_dir, redis_server.url, "second", shard)
    dead = files_of(shm_dir, pid)
    assert set(dead) == {"pool slot", "feature region"}

    with FeatureClient(shard, shared_memory="on") as client:  # a feature client starts
        assert not (shm_dir / dead["feature region"]).exists()
        assert client.gather(np.arange(10)).shape == (10, 8)
        live_regions = client.shared_memory_regions()
        assert live_regions and all((shm_dir / n).exists() for n in live_regions)

        # A producer starts while the killed producer's entry is still in its job's stream: the slot stays,
        # and a consumer reads it whole.
        other = SubgraphPool(redis_server.url, "other", transport="shared_memory")
        other.put(sg("other"))
        assert (shm_dir / dead["pool slot"]).exists()
        consumer = SubgraphPool(redis_server.url, "second")
        entry = consumer.get("t", timeout=5)
        assert entry.subgraph.equals(sg("second", seed=1))
        consumer.ack(entry.entry_id)

        # No entry names it any more: the next producer to start removes it, and nothing of a live process.
        mine = files_of(shm_dir, os.getpid())["pool slot"]
        nxt = SubgraphPool(redis_server.url, "next", transport="shared_memory")
        nxt.put(sg("next"))
        assert not (shm_dir / dead["pool slot"]).exists()
        assert (shm_dir / mine).exists() and all((shm_dir / n).exists() for n in live_regions)
        for pool in (other, consumer, nxt):
            pool.close()
