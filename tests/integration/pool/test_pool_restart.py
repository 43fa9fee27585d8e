"""Producers and consumers survive a restart of a non-persistent Redis; one that stays down is reported.

(The private server persists: test_pool_persistence covers what its restarts keep.)
"""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

from saintpipe.core.errors import ServiceUnavailable
from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph
from saintpipe.services.pool.connection import ReconnectPolicy
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.synthetic import random_subgraph
from tests.support.pool import numbered_subgraphs

FORK = multiprocessing.get_context("fork")
decode_subgraph(encode_subgraph(random_subgraph(3, 3)))  # compile the kernels before forking


sg = numbered_subgraphs(10, 25, job="rs")


def test_restart_loses_buffered_entries_and_the_pool_carries_on(volatile_redis):
    pool = SubgraphPool(volatile_redis.url, "rs", capacity=8)
    for seq in range(3):
        pool.put(sg(seq))
    held = pool.get("trainer", timeout=5)
    volatile_redis.restart()
    # Buffered and pending entries and the counters went with the old process: documented loss.
    assert pool.stats().held == 0 and pool.stats().produced == 0
    assert pool.ack(held.entry_id) is False
    pool.put(sg(10))
    entry = pool.get("trainer", timeout=5)
    assert entry.subgraph.equals(sg(10)) and entry.deliveries == 1
    assert pool.ack(entry.entry_id) is True
    pool.close()


def test_blocked_consumer_and_blocked_producer_ride_through_a_restart(volatile_redis):
    redis_server = volatile_redis  # the restart empties the full pool, which lets the producer in
    pool = SubgraphPool(redis_server.url, "rs", capacity=1)
    pool.put(sg(0))
    got: dict = {}

    def consumer() -> None:
        with SubgraphPool(redis_server.url, "rs2") as other_job:  # waits on an empty job
            got["entry"] = other_job.get("trainer", timeout=60)

    def producer() -> None:
        with SubgraphPool(redis_server.url, "rs", capacity=1) as prod:
            got["put"] = prod.put(sg(1), timeout=60)  # waits on a full pool

    threads = [threading.Thread(target=consumer, daemon=True), threading.Thread(target=producer, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # both are now waiting inside Redis calls
    assert "put" not in got and "entry" not in got
    redis_server.restart()
    threads[1].join(30)
    assert "put" in got, "the waiting producer did not complete after the restart emptied the pool"
    with SubgraphPool(redis_server.url, "rs2") as feeder:
        feeder.put(sg(5))
    threads[0].join(30)
    assert got["entry"] is not None and got["entry"].subgraph.equals(sg(5))
    # The producer's upload was lost in the restart and sent again: its subgraph arrives intact.
    entry = pool.get("trainer", timeout=5)
    assert entry.subgraph.equals(sg(1))
    assert pool.stats().produced == 1
    pool.close()


def produce_forever(url: str) -> None:
    with SubgraphPool(url, "flow", capacity=4) as pool:
        seq = 0
        while True:
            pool.put(sg(seq))
            seq += 1


def consume_forever(url: str) -> None:
    with SubgraphPool(url, "flow", capacity=4) as pool:
        while True:
            entry = pool.get("trainer", timeout=1)
            if entry is not None:
                assert entry.subgraph.equals(sg(entry.subgraph.sequence))
                pool.ack(entry.entry_id)


def test_producer_and_consumer_processes_survive_two_restarts(redis_server):
    workers = [
        FORK.Process(target=f, args=(redis_server.url,), daemon=True)
        for f in (produce_forever, consume_forever)
    ]
    for w in workers:
        w.start()
    pool = SubgraphPool(redis_server.url, "flow")
    try:
        for _ in range(2):
            deadline = time.monotonic() + 60
            while pool.stats().acknowledged < 10:
                assert time.monotonic() < deadline, "subgraphs stopped flowing"
                assert all(w.is_alive() for w in workers), "a worker died"
                time.sleep(0.05)
            redis_server.restart()
        deadline = time.monotonic() + 60
        while pool.stats().acknowledged < 10:  # flowing again after the second restart
            assert time.monotonic() < deadline, "subgraphs stopped flowing after the restart"
            time.sleep(0.05)
        assert all(w.is_alive() for w in workers)
    finally:
        for w in workers:
            w.kill()
            w.join(10)
        pool.close()


def test_redis_that_stays_down_is_service_unavailable(redis_server):
    pool = SubgraphPool(redis_server.url, "down", reconnect=ReconnectPolicy(0.05, 0.2, give_up_after=1.0))
    pool.put(sg(0))
    redis_server.kill()
    with pytest.raises(
        ServiceUnavailable, match=r"unreachable while trying to read pool stats .*gave up after"
    ) as info:
        pool.stats()
    assert redis_server.password not in str(info.value) and "***" in str(info.value)
    with pytest.raises(ServiceUnavailable):
        pool.put(sg(1))
    redis_server.restart()
    assert pool.stats().held == 1  # the same pool object works again; the entry was kept (AOF)
    pool.close()


def test_connecting_to_a_server_that_is_not_there(redis_server):
    url = redis_server.url
    redis_server.kill()
    with pytest.raises(ServiceUnavailable, match="unreachable while trying to connect"):
        SubgraphPool(url, "never", reconnect=ReconnectPolicy(0.05, 0.1, give_up_after=0.3))
