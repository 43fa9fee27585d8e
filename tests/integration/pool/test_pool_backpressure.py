"""A full pool makes producers wait; it never drops or trims an unconsumed subgraph."""

from __future__ import annotations

import threading

import pytest

from saintpipe.core.errors import SaintpipeTimeout
from saintpipe.services.pool.pool import SubgraphPool
from tests.support.pool import numbered_subgraphs

CAPACITY = 3


sg = numbered_subgraphs(12, 30, job="bp")


def test_producer_blocks_at_capacity_and_resumes_when_one_is_consumed(redis_server):
    pool = SubgraphPool(redis_server.url, "bp", capacity=CAPACITY)
    for seq in range(CAPACITY):
        pool.put(sg(seq), timeout=0)
    assert pool.stats().held == CAPACITY

    done = threading.Event()
    result: dict = {}

    def blocked_producer() -> None:
        with SubgraphPool(redis_server.url, "bp", capacity=CAPACITY) as producer:
            result["id"] = producer.put(sg(CAPACITY))  # no timeout: waits as long as it takes
        done.set()

    thread = threading.Thread(target=blocked_producer, daemon=True)
    thread.start()
    assert not done.wait(1.0), "put returned although the pool was full"
    assert pool.stats().held == CAPACITY and pool.stats().produced == CAPACITY

    # Delivering an entry does not make room (it may come back); acknowledging it does.
    entry = pool.get("trainer", timeout=5)
    assert not done.wait(0.5), "a delivered but unacknowledged entry must still count against capacity"
    pool.ack(entry.entry_id)
    assert done.wait(20), "the producer did not resume after an entry was consumed"
    thread.join(5)

    stats = pool.stats()
    assert (stats.held, stats.produced, stats.acknowledged) == (CAPACITY, CAPACITY + 1, 1)
    # Nothing was trimmed: every remaining subgraph, the waiting producer's included, comes out intact.
    seen = []
    while (e := pool.get("trainer", timeout=0)) is not None:
        seen.append(e.subgraph.sequence)
        assert e.subgraph.equals(sg(e.subgraph.sequence))
        pool.ack(e.entry_id)
    assert sorted(seen) == list(range(1, CAPACITY + 1))
    pool.close()


def test_put_timeout_on_a_full_pool_is_a_clear_error_and_leaves_nothing_behind(redis_server):
    pool = SubgraphPool(redis_server.url, "full", capacity=2)
    pool.put(sg(0))
    pool.put(sg(1))
    with pytest.raises(
        SaintpipeTimeout,
        match=r"job 'full' stayed full for 0.2 s: 2 unacknowledged entries held, "
        r"capacity 2",
    ):
        pool.put(sg(2), timeout=0.2)
    with pytest.raises(SaintpipeTimeout):
        pool.put(sg(2), timeout=0)
    client = redis_server.client()
    keys = {k.decode() for k in client.scan_iter(match="saintpipe:pool:{full}:*")}
    uploads = {k for k in keys if ":sg:" in k}
    assert len(uploads) == 2, f"the timed-out uploads were not removed: {sorted(uploads)}"
    assert pool.stats().produced == 2
    client.close()
    pool.close()
