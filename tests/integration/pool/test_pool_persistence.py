"""The private redis-server keeps an AOF: SIGKILLed and restarted, it loses nothing it had written there (with
``appendfsync everysec``, what it answered, unless it still held it in its buffer: see sigkill)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from saintpipe.services.pool.connection import ReconnectPolicy
from saintpipe.services.pool.keys import GROUP
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.scripts import SCRIPTS
from tests.support.pool import numbered_subgraphs

pytestmark = pytest.mark.faults  # part of the fault suite (docs/how-to/faults.md)


sg = numbered_subgraphs(40, 160)


def sigkill(server) -> None:
    """No shutdown: the new server has only what the old one wrote to its AOF.

    With ``appendfsync everysec`` Redis may reply before it writes: while a background fsync is still running
    (right after an AOF rewrite, for one) it keeps new writes in its buffer for up to 2 s. The kill comes once
    the buffer is written (docs/explanation/decisions.md, "appendfsync everysec")."""
    client = server.client()
    deadline = time.monotonic() + 10
    while (info := client.info("persistence"))["aof_buffer_length"]:
        assert time.monotonic() < deadline, f"Redis kept its AOF buffer unwritten: {info}"
        time.sleep(0.01)
    pid = server.pid
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)  # reaped here; restart() finds it gone


def rewrite_aof(client) -> None:
    """Compact the AOF now (Redis does it as the file grows): its RDB image holds no scripts."""
    client.bgrewriteaof()
    deadline = time.monotonic() + 30
    while True:
        info = client.info("persistence")
        if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
            break
        assert time.monotonic() < deadline, "the AOF rewrite did not end"
        time.sleep(0.02)
    assert info["aof_last_bgrewrite_status"] == "ok"


@pytest.mark.parametrize("rewritten", [False, True], ids=["aof", "rewritten-aof"])
@pytest.mark.parametrize("transport", ["redis", "shared_memory"])
def test_entries_counters_and_group_survive_a_sigkill_and_restart(redis_server, shm_dir, transport, rewritten):
    job, total = f"durable-{transport}", 20
    producer = SubgraphPool(redis_server.url, job, transport=transport, capacity=64)
    consumer = SubgraphPool(redis_server.url, job)
    for seq in range(total):
        producer.put(sg(seq, job))
    done = consumer.get("trainer", timeout=1)
    assert consumer.ack(done.entry_id) is True  # acknowledged before the kill: stays acknowledged
    held = consumer.get("trainer", timeout=1)  # pending at the kill: still this trainer's after it
    if rewritten:
        rewrite_aof(redis_server.client())
        producer.put(sg(total, job))  # written after the rewrite: in the AOF's tail
        total += 1

    sigkill(redis_server)
    old_pid = redis_server.pid
    redis_server.restart()
    assert redis_server.pid != old_pid

    client = redis_server.client()
    # SCRIPT LOAD is in the AOF, but not in a rewritten one's RDB image: then the first call of each pool
    # object gets NOSCRIPT, loads the scripts and runs again.
    assert client.script_exists(SCRIPTS["GET"].sha) == [not rewritten]
    (group,) = client.xinfo_groups(consumer.stream_key)  # restored, not created again by the next call
    assert (group["name"].decode(), group["pending"]) == (GROUP, 1)
    s = consumer.stats()
    assert (s.produced, s.acknowledged, s.pending, s.depth) == (total, 1, 1, total - 2)

    assert consumer.recover("trainer") == 1  # the script calls reload them (NoScriptError, then load)
    got = [consumer.get("trainer", timeout=2) for _ in range(total - 1)]
    assert got[0].entry_id == held.entry_id
    assert sorted(e.subgraph.sequence for e in got) == list(range(1, total))
    assert all(e.subgraph.equals(sg(e.subgraph.sequence, job)) for e in got)
    for entry in got:
        consumer.ack(entry.entry_id, wait=False)
    consumer.flush_acks()
    assert client.script_exists(SCRIPTS["GET"].sha) == [True]
    s = consumer.stats()
    assert (s.produced, s.acknowledged, s.dead_lettered, s.held) == (total, total, 0, 0)
    producer.put(sg(99, job))  # the producer carries on on the same objects
    assert consumer.get("trainer", timeout=1).subgraph.equals(sg(99, job))
    client.close()
    producer.close()
    consumer.close()


def test_a_get_blocked_across_a_sigkill_and_restart_gets_its_entry(redis_server):
    job = "blocked-get"
    pool = SubgraphPool(redis_server.url, job, reconnect=ReconnectPolicy(0.05, 0.5, give_up_after=30))
    pool.get("trainer", timeout=0)  # the stream and group exist before the kill
    got: dict = {}

    def wait() -> None:
        got["entry"] = pool.get("trainer", timeout=30)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)  # inside XREADGROUP BLOCK
    sigkill(redis_server)
    time.sleep(0.5)  # the waiter retries against a dead port meanwhile
    redis_server.restart()
    with SubgraphPool(redis_server.url, job) as producer:
        producer.put(sg(1, job))
    waiter.join(30)
    assert got["entry"] is not None and got["entry"].subgraph.equals(sg(1, job))
    assert pool.ack(got["entry"].entry_id) is True
    pool.close()


def test_a_producer_waiting_for_room_across_a_sigkill_and_restart_adds_its_subgraph_once(redis_server):
    job = "full-then-killed"
    pool = SubgraphPool(redis_server.url, job, capacity=1)
    pool.put(sg(0, job))
    result: dict = {}

    def produce() -> None:
        with SubgraphPool(redis_server.url, job, capacity=1) as producer:
            result["id"] = producer.put(sg(1, job), timeout=60)  # waits: the pool is full

    waiting = threading.Thread(target=produce)
    waiting.start()
    time.sleep(0.3)
    sigkill(redis_server)
    redis_server.restart()
    first = pool.get("trainer", timeout=2)  # still there, and still holding the room
    assert first.subgraph.equals(sg(0, job))
    pool.ack(first.entry_id)
    waiting.join(30)
    second = pool.get("trainer", timeout=2)
    assert second.entry_id == result["id"] and second.subgraph.equals(sg(1, job))
    pool.ack(second.entry_id)
    s = pool.stats()
    assert (s.produced, s.acknowledged, s.held) == (2, 2, 0)
    pool.close()
