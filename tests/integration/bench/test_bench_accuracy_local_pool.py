"""InProcessPool: subgraphs drawn by a producer thread reach the feed through a real pool (private Redis,
shared-memory slots), in seed order and unchanged; it cleans up after itself; producer failures surface."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from saintpipe.services.sampler.config import RandomWalkConfig
from saintpipe.services.sampler.parallel import subgraph_seed
from saintpipe.services.sampler.sampler import make_sampler

from saintpipe.bench.accuracy.experiment import load_planetoid
from saintpipe.bench.accuracy.local_pool import InProcessPool

CONFIG = RandomWalkConfig(roots=50, walk_length=2)
ARRAYS = ("node_ids", "indptr", "indices", "edge_weights", "edge_weights_t", "loss_weights")


@pytest.fixture(scope="module")
def cora(real_datasets):
    return load_planetoid(real_datasets / "cora.npz")


def _sampler(graph):
    return make_sampler(CONFIG, graph.indptr, graph.indices, train_nodes=graph.splits["train"])


def _seeds(job_seed: int = 0):
    return (subgraph_seed(job_seed, 0, i) for i in range(1 << 62))


def _slots(shm_dir) -> list[str]:
    """The slot files (the directory's identity file, saintpipe-pool-namespace, is shared by every pool)."""
    return sorted(p.name for p in shm_dir.iterdir() if p.name != "saintpipe-pool-namespace")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie counts as gone (it has exited; its parent has not reaped it yet).
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.parametrize("prefetch", [True, False])
def test_feed_yields_the_directly_drawn_subgraphs_in_seed_order(cora, shm_dir, prefetch):
    direct = _sampler(cora)
    expected_seeds = _seeds()
    source = InProcessPool(_sampler(cora), _seeds(), cora.gather, capacity=4, prefetch=prefetch)
    with source as feed:
        server_pid = source._server.pid
        assert source.transport == "shared_memory"  # a loopback Redis: slots, not bytes
        for _ in range(25):
            item = feed.next(10.0)
            want = direct.sample(next(expected_seeds))
            for name in ARRAYS:
                got, ref = getattr(item.subgraph, name), getattr(want, name)
                assert got.dtype == ref.dtype and np.array_equal(got, ref), name
            assert np.array_equal(item.features, cora.gather(want.node_ids))
            assert item.deliveries == 1
            item.ack()
        assert _slots(shm_dir), "the subgraphs travelled in shared-memory slots"
        stats = source.stats()
        assert stats.produced >= 25 and stats.redelivered == 0 and stats.dead_lettered == 0
    assert _slots(shm_dir) == []
    deadline = time.monotonic() + 5
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server_pid), "the private redis-server is stopped"


def test_on_a_given_redis_the_job_is_deleted_and_the_server_kept(cora, shm_dir, redis_server_session):
    source = InProcessPool(_sampler(cora), _seeds(), cora.gather, redis_url=redis_server_session.url,
                           capacity=2)
    with source as feed:
        feed.next(10.0).ack()
        time.sleep(0.3)
        assert source.produced <= 2 + 1  # the producer waits while the pool is full
    client = redis_server_session.client()
    assert client.ping()
    assert list(client.scan_iter(match=f"saintpipe:pool:{{{source.job_id}}}*")) == []
    assert _slots(shm_dir) == []


def test_a_producer_failure_is_raised_by_the_feed_without_waiting_out_the_timeout(cora, shm_dir):
    sampler = _sampler(cora)

    class Failing:
        calls = 0

        def sample(self, seed, **kwargs):
            Failing.calls += 1
            if Failing.calls > 2:
                raise RuntimeError("sampler broke")
            return sampler.sample(seed, **kwargs)

    with InProcessPool(Failing(), _seeds(), cora.gather) as feed:
        feed.next(10.0).ack()
        feed.next(10.0).ack()
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="sampler broke"):
            feed.next(30.0)
        assert time.monotonic() - started < 5
    assert _slots(shm_dir) == []
