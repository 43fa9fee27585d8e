"""The producer drawing straight into shared-memory slots, on a real Redis (no Ray: the loop itself)."""

from __future__ import annotations

import threading
import time

import numpy as np

from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.pool.codec import encode_subgraph
from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.sampler.config import RandomWalkConfig
from saintpipe.services.sampler.parallel import subgraph_seed
from saintpipe.services.sampler.sampler import make_sampler
from saintpipe.services.sampler_service.production import Producer
from saintpipe.services.sampler_service.sequence import SequenceCursor


def producer_for(url: str, job: str, capacity: int, shm_dir) -> tuple[Producer, SubgraphPool, object]:
    rng = np.random.default_rng(5)
    indptr, indices = edges_to_csr(rng.integers(0, 400, 3000), rng.integers(0, 400, 3000), 400)
    sampler = make_sampler(RandomWalkConfig(roots=40, clip_multiple=None), indptr, indices)
    config = PoolConfig(url=url, job_id=job, capacity=capacity, transport="shared_memory")
    pool = SubgraphPool.from_config(config)
    producer = Producer(sampler, pool, SequenceCursor(config, 2), job_id=job, worker=2, job_seed=11,
                        push_poll_s=0.05)
    return producer, pool, sampler


def test_subgraphs_drawn_into_slots_are_the_sampler_s_bit_for_bit(redis_server, shm_dir):
    producer, pool, sampler = producer_for(redis_server.url, "direct", 16, shm_dir)
    assert producer._direct  # the path under test: kernels writing into the pool's slots
    consumer = SubgraphPool(redis_server.url, "direct")
    stop = threading.Event()
    taken = []

    def consume():
        while len(taken) < 40:
            entry = consumer.get("t", timeout=5)
            taken.append(entry.subgraph)
            consumer.ack(entry.entry_id)
        stop.set()

    reader = threading.Thread(target=consume)
    reader.start()
    producer.run(stop)
    reader.join()
    assert not pool.unsettled
    assert [sg.sequence for sg in taken] == list(range(40))
    for sg in taken:
        expected = sampler.sample(subgraph_seed(11, 2, sg.sequence), job_id="direct", worker=2,
                                  sequence=sg.sequence)
        assert encode_subgraph(sg) == encode_subgraph(expected)
    assert producer.snapshot().subgraphs >= 40
    # One slot per entry the pool holds, plus the one being written and the one in flight, at most.
    assert len(list(shm_dir.glob("saintpipe-pool-*direct+*"))) <= pool.capacity + 2
    pool.close()
    consumer.close()


def test_a_stop_while_the_pool_is_full_returns_and_gives_up_only_the_waiting_put(redis_server, shm_dir):
    producer, pool, _ = producer_for(redis_server.url, "fullstop", 3, shm_dir)
    stop = threading.Event()
    done = threading.Thread(target=producer.run, args=(stop,))
    done.start()
    deadline = time.monotonic() + 10
    while pool.stats().held < 3 and time.monotonic() < deadline:  # nobody consumes: the pool fills
        time.sleep(0.02)
    time.sleep(0.2)
    stop.set()
    done.join(timeout=5)
    assert not done.is_alive() and not pool.unsettled
    counts = producer.snapshot()
    assert counts.subgraphs == 3 and counts.pool_wait_seconds > 0.1
    stats = pool.stats()
    assert (stats.produced, stats.held) == (3, 3)  # nothing dropped, nothing added after the stop
    client = redis_server.client()
    assert len(list(client.scan_iter(match="saintpipe:pool:{fullstop}:sg:*"))) == 3  # no upload left over
    pool.close()
