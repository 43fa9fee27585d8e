"""Fixtures of the trainer integration tests: Cora as a 2-shard dataset, real feature shard servers,
a real Redis (``redis_server_session`` from tests/conftest.py), a real local Ray, and a producer thread
that feeds the pool with random-walk subgraphs drawn by the sampler kernels."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tests.support.ray_local import start_local_ray

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def cora_dir(tmp_path_factory, real_datasets) -> Path:
    from saintpipe.services.dataset.store import write_dataset

    data = np.load(real_datasets / "cora.npz")
    splits = {name: np.flatnonzero(data[f"{name}_mask"]) for name in ("train", "val", "test")}
    out = tmp_path_factory.mktemp("trainer") / "cora"
    write_dataset(
        out,
        name="cora",
        indptr=data["indptr"],
        indices=data["indices"],
        features=data["features"],
        labels=data["labels"],
        splits=splits,
        num_shards=2,
    )
    return out


@pytest.fixture(scope="module")
def feature_addresses(cora_dir) -> str:
    """Two real gRPC feature shard servers on loopback; ``"h:p;h:p"``."""
    from saintpipe.services.feature_shard.server import create_server, stop_server

    servers = [create_server(cora_dir, k, port=0) for k in range(2)]
    yield ";".join(f"127.0.0.1:{port}" for _, port in servers)
    for server, _ in servers:
        stop_server(server, grace=1.0)


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray whose workers import this checkout (shared by the session: it starts slowly)."""
    import ray

    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    start_local_ray()
    yield ray
    ray.shutdown()


@contextmanager
def producing(cora_dir: Path, url: str, job: str, roots: int = 400, seed: int = 0):
    """A thread that samples random-walk subgraphs of Cora and puts them into ``job``'s pool until stopped."""
    from saintpipe.core.errors import SaintpipeTimeout
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.services.pool.pool import SubgraphPool
    from saintpipe.services.sampler.config import RandomWalkConfig
    from saintpipe.services.sampler.parallel import subgraph_seed
    from saintpipe.services.sampler.sampler import make_sampler

    dataset = open_dataset(cora_dir)
    sampler = make_sampler(
        RandomWalkConfig(roots=roots), dataset.indptr, dataset.indices, train_nodes=dataset.splits["train"]
    )
    stop = threading.Event()
    pool = SubgraphPool(url, job, capacity=8)
    produced = []

    def run() -> None:
        i = 0
        while not stop.is_set():
            sub = sampler.sample(subgraph_seed(seed, 0, i), job_id=job, sequence=i)
            while not stop.is_set():
                try:
                    pool.put(sub, timeout=0.2)
                    produced.append(i)
                    break
                except SaintpipeTimeout:
                    continue
            i += 1

    thread = threading.Thread(target=run, name=f"producer-{job}", daemon=True)
    thread.start()
    try:
        yield pool, produced
    finally:
        stop.set()
        thread.join(timeout=10)
        pool.close()


@pytest.fixture
def producer(cora_dir, redis_server_session):
    """``with producer("job") as (pool, produced): ...`` feeds the job's pool while the block runs."""
    return lambda job, **kw: producing(cora_dir, redis_server_session.url, job, **kw)
