"""``ack(wait=False)`` on a real Redis: carried by the next call, flushed when idle, never lost, never doubled."""

from __future__ import annotations

import gc
import time
import weakref

from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.synthetic import random_subgraph
from tests.support.pool import sg


def test_a_deferred_ack_travels_with_the_next_get(redis_server):
    with SubgraphPool(redis_server.url, "defer") as pool, SubgraphPool(redis_server.url, "defer") as watcher:
        for i in range(3):
            pool.put(sg(i, "defer"))
        first = pool.get("t", timeout=1)
        assert pool.ack(first.entry_id, wait=False) is None
        second = pool.get("t", timeout=1)  # carries the acknowledgement, applied before the GET script
        s = watcher.stats()
        assert (s.acknowledged, s.pending, s.depth) == (1, 1, 1)
        assert second.subgraph.equals(sg(1, "defer"))
        pool.ack(second.entry_id, wait=False)
        assert pool.ack(first.entry_id) is False  # the deferred one was applied: not pending any more
        assert watcher.stats().acknowledged == 2


def test_an_idle_consumer_s_deferred_ack_is_flushed_before_the_visibility_timeout(redis_server):
    # Exactly once without failures, even when the trainer does nothing else for a while after acking.
    with (
        SubgraphPool(redis_server.url, "idle", visibility_timeout=0.4) as pool,
        SubgraphPool(redis_server.url, "idle", visibility_timeout=0.4) as other,
    ):
        pool.put(sg(0, "idle"))
        entry = pool.get("slow", timeout=1)
        pool.ack(entry.entry_id, wait=False)
        time.sleep(1.0)  # no call on `pool`: only its background flush can send the acknowledgement
        assert other.get("other", timeout=0) is None  # not redelivered
        s = other.stats()
        assert (s.acknowledged, s.redelivered, s.held) == (1, 0, 0)


def test_close_sends_queued_acks(redis_server):
    with SubgraphPool(redis_server.url, "closing") as watcher:
        pool = SubgraphPool(redis_server.url, "closing", visibility_timeout=60)
        ids = [pool.put(sg(i, "closing")) for i in range(3)]
        for _ in ids:
            pool.ack(pool.get("t", timeout=1).entry_id, wait=False)
        pool.close()
        s = watcher.stats()
        assert (s.acknowledged, s.held) == (3, 0)


def test_deferred_acks_survive_a_redis_restart_as_at_least_once(redis_server):
    with SubgraphPool(redis_server.url, "restart-acks", visibility_timeout=60) as pool:
        pool.put(sg(0, "restart-acks"))
        entry = pool.get("t", timeout=1)
        pool.ack(entry.entry_id, wait=False)
        redis_server.restart()  # the entry (and the ack's target) are gone with the non-persistent server
        pool.put(sg(1, "restart-acks"))  # carries the ack: reconnects, it finds nothing pending, no error
        again = pool.get("t", timeout=5)
        assert again.subgraph.equals(sg(1, "restart-acks"))
        assert pool.ack(again.entry_id) is True
        assert pool.stats().held == 0


def test_the_background_flush_does_not_keep_a_dropped_pool_alive(redis_server):
    pool = SubgraphPool(redis_server.url, "dropped")
    pool.put(sg(0, "dropped"))
    pool.ack(pool.get("t", timeout=1).entry_id, wait=False)  # starts the flush thread
    ref = weakref.ref(pool)
    time.sleep(0.3)  # the acknowledgement is flushed meanwhile
    del pool
    gc.collect()
    assert ref() is None
    with SubgraphPool(redis_server.url, "dropped") as watcher:
        assert watcher.stats().acknowledged == 1


def test_flush_acks_sends_a_batch_of_queued_acknowledgements_at_once(redis_server):
    producer = SubgraphPool(redis_server.url, "batch")
    consumer = SubgraphPool(redis_server.url, "batch", visibility_timeout=60)
    for i in range(3):
        producer.put(random_subgraph(10, 30, seed=i, sequence=i))
    entries = [consumer.get("t", timeout=1) for _ in range(3)]
    for entry in entries:
        assert consumer.ack(entry.entry_id, wait=False) is None
    consumer.flush_acks()
    stats = producer.stats()  # another object: only what reached Redis counts
    assert (stats.acknowledged, stats.held) == (3, 0)
    consumer.flush_acks()  # nothing queued: no round trip, no error
    producer.close()
    consumer.close()
