"""A trainer restarted under its old consumer name takes back what it held at once (``recover``)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph
from saintpipe.services.pool.keys import GROUP
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.synthetic import random_subgraph
from tests.support.pool import assert_balanced, sg

FORK = multiprocessing.get_context("fork")
decode_subgraph(encode_subgraph(random_subgraph(3, 3)))  # compile the kernels before forking


def test_a_restarted_consumer_gets_its_unacknowledged_entries_first_and_at_once(redis_server):
    job = "recover"
    producer = SubgraphPool(redis_server.url, job)
    for seq in range(5):
        producer.put(sg(seq, job))
    before = SubgraphPool(redis_server.url, job)  # the trainer's first life (visibility timeout 30 s)
    held = [before.get("trainer-0", timeout=1) for _ in range(3)]
    assert [e.subgraph.sequence for e in held] == [0, 1, 2]
    before.ack(held[1].entry_id)  # it finished one of them before it was killed

    after = SubgraphPool(redis_server.url, job)  # the same name, a new process
    started = time.monotonic()
    assert after.recover("trainer-0") == 2
    assert SubgraphPool(redis_server.url, job).get("other", timeout=0).subgraph.sequence == 3  # not theirs
    got = [after.get("trainer-0", timeout=1) for _ in range(3)]
    assert time.monotonic() - started < 5  # not after the 30 s visibility timeout
    assert [e.subgraph.sequence for e in got] == [0, 2, 4]  # the recovered ones first, then new ones
    assert [e.deliveries for e in got] == [2, 2, 1]
    assert all(e.subgraph.equals(sg(e.subgraph.sequence, job)) for e in got)
    assert [e.entry_id for e in got[:2]] == [held[0].entry_id, held[2].entry_id]
    for entry in got:
        assert after.ack(entry.entry_id) is True
    s = after.stats()
    assert (s.redelivered, s.acknowledged, s.pending, s.depth) == (2, 4, 1, 0)  # entry 3 is "other"'s
    assert_balanced(after)
    assert after.recover("trainer-0") == 0
    for pool in (producer, before, after):
        pool.close()


def test_recover_with_nothing_held_changes_nothing(redis_server):
    pool = SubgraphPool(redis_server.url, "nothing-held")
    assert pool.recover("fresh") == 0  # no stream yet
    pool.put(sg(0, "nothing-held"))
    assert pool.recover("fresh") == 0
    entry = pool.get("fresh", timeout=1)
    assert entry.deliveries == 1 and pool.stats().redelivered == 0
    pool.close()


def test_a_recovered_entry_taken_over_meanwhile_is_skipped(redis_server):
    job = "taken-over"
    client = redis_server.client()
    pool = SubgraphPool(redis_server.url, job)
    pool.put(sg(0, job))
    pool.put(sg(1, job))
    first = pool.get("trainer", timeout=1)
    assert pool.recover("trainer") == 1
    client.xclaim(pool.stream_key, GROUP, "someone-else", 0, [first.entry_id])  # took it over since
    entry = pool.get("trainer", timeout=1)
    assert entry.subgraph.sequence == 1  # not entry 0, which is someone else's now
    pool.close()
    client.close()


def test_an_entry_delivered_by_a_blocking_read_is_recovered_with_its_bytes(redis_server):
    job = "blocked-then-killed"
    pool = SubgraphPool(redis_server.url, job)
    got = {}
    waiter = threading.Thread(target=lambda: got.setdefault("entry", pool.get("trainer", timeout=10)))
    waiter.start()
    time.sleep(0.3)  # waiting in XREADGROUP BLOCK: the entry's bytes stay under the producer's key
    with SubgraphPool(redis_server.url, job) as producer:
        producer.put(sg(7, job))
    waiter.join(10)
    assert got["entry"].subgraph.sequence == 7
    after = SubgraphPool(redis_server.url, job)
    assert after.recover("trainer") == 1
    again = after.get("trainer", timeout=1)
    assert again.entry_id == got["entry"].entry_id and again.subgraph.equals(sg(7, job))
    pool.close()
    after.close()


def test_a_recovered_entry_past_max_deliveries_is_dead_lettered(redis_server):
    job = "recovered-poison"
    pool = SubgraphPool(redis_server.url, job, max_deliveries=1)
    pool.put(sg(0, job))
    pool.get("trainer", timeout=1)  # its one allowed delivery; the trainer dies on it
    assert pool.recover("trainer") == 1
    assert pool.get("trainer", timeout=0.2) is None
    (letter,) = pool.dead_letters()
    assert letter.reason == "delivered 1 time without acknowledgement"
    s = pool.stats()
    assert (s.dead_lettered, s.redelivered) == (1, 0)
    assert_balanced(pool)
    pool.close()


def hold_and_hang(url: str, job: str, ready) -> None:
    with SubgraphPool(url, job) as pool:
        for _ in range(2):
            pool.get("trainer-7", timeout=5)
        ready.set()
        time.sleep(600)  # killed here, mid-step


def test_a_killed_trainer_process_restarted_under_its_name_recovers_its_entries(redis_server):
    job = "killed-trainer"
    with SubgraphPool(redis_server.url, job) as producer:
        for seq in range(3):
            producer.put(sg(seq, job))
    ready = FORK.Event()
    victim = FORK.Process(target=hold_and_hang, args=(redis_server.url, job, ready), daemon=True)
    victim.start()
    assert ready.wait(30)
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(10)
    with SubgraphPool(redis_server.url, job) as restarted:
        assert restarted.recover("trainer-7") == 2
        got = [restarted.get("trainer-7", timeout=1) for _ in range(3)]
        assert [(e.subgraph.sequence, e.deliveries) for e in got] == [(0, 2), (1, 2), (2, 1)]
        for entry in got:
            restarted.ack(entry.entry_id)
        s = restarted.stats()
        assert (s.produced, s.acknowledged, s.redelivered, s.held) == (3, 3, 2, 0)
