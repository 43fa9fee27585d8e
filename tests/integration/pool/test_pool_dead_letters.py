"""Entries that cannot be trained on go to the job's dead-letter stream; trainers carry on with the next one.

Invariant checked throughout: produced == acknowledged + depth + pending + dead_lettered.
"""

from __future__ import annotations

import logging
import os
import time

import pytest
from prometheus_client import CollectorRegistry

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.pool.metrics import PoolMetrics
from saintpipe.services.pool.pool import SubgraphPool
from tests.support.pool import assert_balanced, sg

pytestmark = pytest.mark.faults  # part of the fault suite (docs/how-to/faults.md)


def add_by_hand(client, job: str, bytes_key: str, value: bytes | None) -> str:
    """An entry written by something other than a pool (counted as produced, as a put would)."""
    if value is not None:
        client.set(bytes_key, value)
    entry_id = client.xadd(f"saintpipe:pool:{{{job}}}:stream", {"k": bytes_key}).decode()
    client.hincrby(f"saintpipe:pool:{{{job}}}:counters", "produced", 1)
    return entry_id


def dead_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "dead-letter stream" in r.getMessage()]


def test_garbage_entries_are_dead_lettered_and_the_good_ones_delivered(redis_server, caplog):
    job = "garbage"
    client = redis_server.client()
    pool = SubgraphPool(redis_server.url, job)
    pool.get("t", timeout=0)  # creates the stream and the group
    pool.put(sg(0, job))
    random_id = add_by_hand(client, job, f"saintpipe:pool:{{{job}}}:sg:random", os.urandom(5000))
    pool.put(sg(1, job))
    missing_id = add_by_hand(client, job, f"saintpipe:pool:{{{job}}}:sg:nowhere", None)
    pool.put(sg(2, job))
    got = []
    with caplog.at_level(logging.WARNING, logger="saintpipe.services.pool.pool"):
        while (entry := pool.get("t", timeout=0.2)) is not None:  # never raises
            got.append(entry.subgraph.sequence)
            assert entry.subgraph.equals(sg(entry.subgraph.sequence, job))
            pool.ack(entry.entry_id, wait=False)
    assert got == [0, 1, 2]
    letters = {letter.entry_id: letter for letter in pool.dead_letters()}
    assert set(letters) == {random_id, missing_id}
    assert letters[missing_id].reason == "its bytes are missing from Redis"
    assert letters[random_id].reason  # the decoder's words for what is wrong
    for letter in letters.values():
        assert letter.consumer == "t" and letter.deliveries == 1 and abs(letter.time - time.time()) < 60
    warnings = dead_warnings(caplog)
    assert len(warnings) == 2 and any(random_id in w for w in warnings) and any(missing_id in w for w in warnings)
    pool.flush_acks()
    s = pool.stats()
    assert (s.produced, s.acknowledged, s.dead_lettered, s.held) == (5, 3, 2, 0)
    assert_balanced(pool)
    assert not client.exists(f"saintpipe:pool:{{{job}}}:sg:random")  # its bytes went with it
    pool.close()
    client.close()


def test_an_undecodable_put_is_dead_lettered_with_the_decoders_reason(redis_server):
    pool = SubgraphPool(redis_server.url, "bad")
    bad_id = pool.put_encoded(b"\x08\x02garbage")
    pool.put(sg(1, "bad"))
    entry = pool.get("t", timeout=1)
    assert entry.subgraph.equals(sg(1, "bad"))
    pool.ack(entry.entry_id)
    (letter,) = pool.dead_letters()
    assert letter.entry_id == bad_id and "subgraph" in letter.reason
    s = pool.stats()
    assert (s.dead_lettered, s.acknowledged, s.held) == (1, 1, 0)
    assert_balanced(pool)
    pool.close()


def test_an_entry_delivered_too_often_is_dead_lettered_instead_of_delivered_again(redis_server, caplog):
    job = "poison"
    pool = SubgraphPool(redis_server.url, job, visibility_timeout=0.2, max_deliveries=3)
    pool.put(sg(0, job))
    for delivery in (1, 2, 3):  # each trainer that takes it "crashes": no acknowledgement
        entry = pool.get(f"trainer-{delivery}", timeout=2)
        assert entry.deliveries == delivery and entry.subgraph.equals(sg(0, job))
        time.sleep(0.25)
    pool.put(sg(1, job))
    with caplog.at_level(logging.WARNING, logger="saintpipe.services.pool.pool"):
        entry = pool.get("trainer-4", timeout=2)
    assert entry.subgraph.equals(sg(1, job))  # the poison pill was set aside on the way
    pool.ack(entry.entry_id)
    (letter,) = pool.dead_letters()
    assert letter.reason == "delivered 3 times without acknowledgement"
    assert (letter.consumer, letter.deliveries) == ("trainer-4", 3)
    assert len(dead_warnings(caplog)) == 1
    s = pool.stats()
    assert (s.produced, s.acknowledged, s.dead_lettered, s.redelivered, s.held) == (2, 1, 1, 2, 0)
    assert_balanced(pool)
    pool.close()


def test_max_deliveries_zero_means_no_limit(redis_server):
    pool = SubgraphPool(redis_server.url, "unlimited", visibility_timeout=0.1, max_deliveries=0)
    pool.put(sg(0, "unlimited"))
    for delivery in range(1, 9):
        entry = pool.get("t", timeout=2)
        assert entry.deliveries == delivery
        time.sleep(0.12)
    assert pool.stats().dead_lettered == 0
    pool.close()


def test_only_the_consumer_that_holds_an_entry_may_dead_letter_it(redis_server):
    pool = SubgraphPool(redis_server.url, "held")
    pool.put(sg(0, "held"))
    entry = pool.get("owner", timeout=1)
    assert pool._dead.move("somebody-else", entry.entry_id, "not mine", 1) is False
    assert pool.stats().pending == 1 and pool.dead_letters() == []
    assert pool._dead.move("owner", entry.entry_id, "mine", 1) is True
    assert pool._dead.move("owner", entry.entry_id, "again", 1) is False  # once
    assert pool.stats().dead_lettered == 1 and pool.ack(entry.entry_id) is False
    assert_balanced(pool)
    pool.close()


def test_the_dead_letter_stream_is_capped_and_read_newest_last(redis_server):
    job = "capped"
    client = redis_server.client()
    pool = SubgraphPool(redis_server.url, job, dead_letter_limit=20)
    pool.get("t", timeout=0)
    ids = [add_by_hand(client, job, f"saintpipe:pool:{{{job}}}:sg:gone-{i}", None) for i in range(250)]
    assert pool.get("t", timeout=0) is None  # all 250 set aside in one call
    dead = f"saintpipe:pool:{{{job}}}:dead"
    assert 20 <= client.xlen(dead) < 250  # MAXLEN ~: trimmed by whole nodes, so about the limit
    letters = pool.dead_letters(5)
    assert [letter.entry_id for letter in letters] == ids[-5:]
    assert pool.stats().dead_lettered == 250  # the counter counts them all
    with pytest.raises(InvalidArgument, match="count"):
        pool.dead_letters(0)
    assert_balanced(pool)
    pool.close()
    client.close()


def test_delete_job_removes_the_dead_letters_too(redis_server):
    job = "doomed-dead"
    client = redis_server.client()
    pool = SubgraphPool(redis_server.url, job)
    pool.put_encoded(b"garbage")
    assert pool.get("t", timeout=0) is None
    assert client.exists(f"saintpipe:pool:{{{job}}}:dead")
    pool.delete_job()
    assert list(client.scan_iter(match=f"saintpipe:pool:{{{job}}}*")) == []
    assert pool.dead_letters() == [] and pool.stats().dead_lettered == 0
    pool.close()
    client.close()


def test_the_counter_of_older_versions_carries_over_and_metrics_show_it(redis_server):
    job = "upgraded"
    client = redis_server.client()
    client.hset(f"saintpipe:pool:{{{job}}}:counters", mapping={"produced": 3, "acknowledged": 1, "malformed": 2})
    pool = SubgraphPool(redis_server.url, job)
    assert pool.stats().dead_lettered == 2
    registry = CollectorRegistry()
    PoolMetrics(registry).update(job, pool.stats())
    assert registry.get_sample_value("saintpipe_pool_dead_lettered_total", {"job": job, "group": ""}) == 2
    pool.close()
    client.close()


def test_pool_arguments_for_dead_letters_are_checked(redis_server):
    with pytest.raises(InvalidArgument, match="max_deliveries"):
        SubgraphPool(redis_server.url, "x", max_deliveries=-1)
    with pytest.raises(InvalidArgument, match="dead_letter_limit"):
        SubgraphPool(redis_server.url, "x", dead_letter_limit=0)


def test_the_config_carries_the_dead_letter_settings(redis_server):
    config = PoolConfig(job_id="configured", transport="redis", max_deliveries=2, dead_letter_limit=7)
    with SubgraphPool.from_config(config, url=redis_server.url) as pool:
        assert pool.max_deliveries == 2 and pool._dead._limit == 7
