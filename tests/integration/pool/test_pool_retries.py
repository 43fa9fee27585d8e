"""A round trip that ran on Redis but whose reply was lost is sent again: nothing may be lost or added twice.

That is what a stalled Redis does (SIGSTOP, a long fork, a swapped-out server):
the client's socket times out, the pool sends the same round trip again, and
when Redis resumes it runs both. The tests make it happen deterministically by
letting a round trip run and then dropping its reply, and for real by stopping
a private redis-server for longer than the clients' socket timeout.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import redis

from saintpipe.services.pool import resp
from saintpipe.services.pool.codec import encode_subgraph
from saintpipe.services.pool.connection import ReconnectPolicy
from saintpipe.services.pool.keys import GROUP
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.redis_server import RedisServer
from saintpipe.services.pool.resp import pack
from saintpipe.services.pool.scripts import SCRIPTS
from tests.support.pool import assert_balanced, numbered_subgraphs

pytestmark = pytest.mark.faults  # part of the fault suite (docs/how-to/faults.md)


sg = numbered_subgraphs(20, 60, job="retry")


def drop_next_reply(monkeypatch, pool: SubgraphPool, meanwhile=None) -> dict:
    """The pool's next round trip runs on Redis, then its reply is lost (as after a socket timeout).

    ``meanwhile()`` runs between the two: what other clients do before the pool sends it again.
    """
    conns = pool._link.conns
    real = conns.exchange
    state = {"dropped": 0}

    def exchange(commands, *, raise_errors=True):
        replies = real(commands, raise_errors=raise_errors)
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
            return replies  # nothing ran (a fresh server does not know the scripts yet): not the one
        if state["dropped"] == 0:
            state["dropped"] = 1
            if meanwhile is not None:
                meanwhile()
            raise redis.TimeoutError("Timeout reading from socket (the test dropped the reply)")
        return replies

    monkeypatch.setattr(conns, "exchange", exchange)
    return state


def bytes_keys(client, job: str) -> list[bytes]:
    return list(client.scan_iter(match=f"saintpipe:pool:{{{job}}}:sg:*"))


# -- get ------------------------------------------------------------------------------------------------


def test_a_get_sent_again_after_its_reply_was_lost_loses_no_entry(redis_server, monkeypatch):
    pool = SubgraphPool(redis_server.url, "retry", visibility_timeout=0.5)
    for seq in range(3):
        pool.put(sg(seq))
    state = drop_next_reply(monkeypatch, pool)
    first = pool.get("trainer", timeout=1)
    assert state["dropped"] == 1
    # The lost attempt took entry 0 (its bytes moved under that attempt's key); the retry took entry 1 under a
    # key of its own. Before the fix both used one key, and entry 1's bytes overwrote entry 0's.
    assert first.subgraph.equals(sg(1))
    assert pool.ack(first.entry_id) is True
    time.sleep(0.6)  # entry 0 has been held, by no one who knows it, past the visibility timeout
    again = pool.get("other", timeout=1)
    assert again.subgraph.equals(sg(0)) and again.deliveries == 2  # whole: not dead-lettered
    third = pool.get("other", timeout=1)
    assert third.subgraph.equals(sg(2))
    pool.ack(again.entry_id)
    pool.ack(third.entry_id)
    s = pool.stats()
    assert (s.produced, s.acknowledged, s.dead_lettered, s.held) == (3, 3, 0, 0)
    assert pool.dead_letters() == []
    pool.close()


def test_the_same_get_commands_run_twice_take_nothing_the_second_time(redis_server):
    pool = SubgraphPool(redis_server.url, "twice", visibility_timeout=0.3)
    for seq in range(2):
        pool.put(sg(seq, "twice"))
    keys = [pool.stream_key, pool.counters_key, pool.at_key, "saintpipe:pool:{twice}:sg:dest-1"]
    commands = [SCRIPTS["GET"].command(keys, [GROUP, "trainer", 300, "0", 5]), pack("GET", keys[3])]
    (_, _, present, _), payload = pool._link.conns.exchange(commands)
    assert present == 1 and bytes(payload) == encode_subgraph(sg(0, "twice"))
    # The identical round trip again (a connection that broke after sending is retried as is): the key is
    # taken, so it must not rename entry 1's bytes onto it.
    (eid2, _, _, _), payload2 = pool._link.conns.exchange(commands)
    assert not eid2 and bytes(payload2) == encode_subgraph(sg(0, "twice"))
    time.sleep(0.4)
    got = [pool.get("other", timeout=1) for _ in range(2)]
    assert sorted(e.subgraph.sequence for e in got) == [0, 1]
    assert all(e.subgraph.equals(sg(e.subgraph.sequence, "twice")) for e in got)
    pool.close()


# -- put ------------------------------------------------------------------------------------------------


def consume_all(url: str, job: str, consumer: str = "meanwhile"):
    """Get and acknowledge everything waiting (another trainer, between the lost reply and the retry)."""

    def run() -> None:
        with SubgraphPool(url, job) as other:
            while (entry := other.get(consumer, timeout=0)) is not None:
                assert other.ack(entry.entry_id) is True

    return run


def deliver_all(url: str, job: str):
    def run() -> None:
        with SubgraphPool(url, job) as other:
            while other.get("meanwhile", timeout=0) is not None:
                pass

    return run


@pytest.mark.parametrize("transport", ["redis", "shared_memory"])
@pytest.mark.parametrize("meanwhile", ["nothing", "delivered", "acknowledged"])
def test_a_put_sent_again_after_its_reply_was_lost_adds_one_entry(
    redis_server, shm_dir, monkeypatch, transport, meanwhile
):

    job = f"put-{transport}-{meanwhile}"
    client = redis_server.client()
    pool = SubgraphPool(redis_server.url, job, transport=transport)
    between = {"nothing": None, "delivered": deliver_all, "acknowledged": consume_all}[meanwhile]
    drop_next_reply(monkeypatch, pool, between and between(redis_server.url, job))
    entry_id = pool.put(sg(0, job))
    s = pool.stats()
    assert s.produced == 1, "the retried put added its subgraph twice"
    assert client.xlen(pool.stream_key) == (1 if meanwhile != "acknowledged" else 0)
    if meanwhile == "nothing":
        entry = pool.get("trainer", timeout=1)
        assert entry.entry_id == entry_id and entry.subgraph.equals(sg(0, job))
        # The retry's SET NX left the adopted bytes alone: they did not get an expiry on the way.
        pool.ack(entry.entry_id)
    elif meanwhile == "delivered":  # pending with "meanwhile", its bytes moved; the retry's copy is gone
        assert len(bytes_keys(client, job)) == 1
    assert_balanced(pool)
    if meanwhile == "acknowledged":
        assert s.acknowledged == 1 and bytes_keys(client, job) == []  # no orphan copy of the bytes
    assert pool.dead_letters() == []
    pool.close()
    client.close()


def test_adopted_bytes_keep_no_expiry_after_a_retried_put(redis_server, monkeypatch):
    client = redis_server.client()
    pool = SubgraphPool(redis_server.url, "ttl")
    drop_next_reply(monkeypatch, pool)
    pool.put(sg(0, "ttl"))
    (key,) = bytes_keys(client, "ttl")
    assert client.pttl(key) == -1  # an expiry would lose the subgraph if it waited 2 minutes for a trainer
    pool.close()
    client.close()


def test_a_pipelined_put_whose_reply_was_lost_is_added_once(redis_server, monkeypatch):
    pool = SubgraphPool(redis_server.url, "piped")
    pool.stats()  # Redis learns the scripts (a reply saying it does not know them is not a lost one)
    real = resp.PendingExchange.replies
    dropped = []

    def replies(self):
        got = real(self)
        if not dropped and not any(isinstance(r, redis.exceptions.NoScriptError) for r in got):
            dropped.append(got)
            raise redis.TimeoutError("Timeout reading from socket (the test dropped the reply)")
        return got

    monkeypatch.setattr(resp.PendingExchange, "replies", replies)
    pool.put_nowait(sg(0, "piped"))
    entry_id = pool.settle()
    assert dropped and pool.stats().produced == 1
    entry = pool.get("trainer", timeout=1)
    assert entry.entry_id == entry_id and entry.subgraph.equals(sg(0, "piped"))
    pool.ack(entry.entry_id)
    assert_balanced(pool)
    pool.close()


def test_records_of_answered_puts_are_forgotten_by_the_next_put_and_on_close(redis_server):
    client = redis_server.client()
    pool = SubgraphPool(redis_server.url, "forget")
    uploads = lambda: [f for f in client.hkeys(pool.at_key) if b":sg:" in f]
    pool.put(sg(0, "forget"))
    assert len(uploads()) == 1  # kept until the producer has read the answer: it might send the put again
    pool.put(sg(1, "forget"))
    assert len(uploads()) == 1  # the second put carried the first one's "forget"
    pool.close()
    assert uploads() == []
    client.close()


def test_a_given_up_put_that_was_added_after_all_keeps_its_entry(redis_server, monkeypatch):
    """A put whose outcome stays unknown (Redis away past the deadline) is discarded: never its entry's bytes."""
    pool = SubgraphPool(redis_server.url, "given-up", reconnect=ReconnectPolicy(0.01, 0.01, give_up_after=0.05))
    pool.stats()  # Redis learns the scripts (a reply saying it does not know them is not a lost one)
    conns = pool._link.conns
    real = conns.exchange

    def exchange(commands, *, raise_errors=True):  # every reply lost: it ran, the producer never learns
        real(commands, raise_errors=raise_errors)
        raise redis.TimeoutError("Timeout reading from socket (the test dropped the reply)")

    monkeypatch.setattr(conns, "exchange", exchange)
    with pytest.raises(Exception, match="unreachable"):
        pool.put(sg(0, "given-up"))
    monkeypatch.undo()
    assert pool.stats().produced == 1
    entry = pool.get("trainer", timeout=1)
    assert entry.subgraph.equals(sg(0, "given-up"))  # its bytes were not removed as an abandoned upload
    pool.ack(entry.entry_id)
    assert client_keys(redis_server, "given-up") <= {pool.stream_key, pool.counters_key, pool.at_key}
    pool.close()


def client_keys(server, job: str) -> set[str]:
    client = server.client()
    try:
        return {k.decode() for k in client.scan_iter(match=f"saintpipe:pool:{{{job}}}*")}
    finally:
        client.close()


# -- a real stall ---------------------------------------------------------------------------------------


def test_a_redis_stopped_longer_than_the_socket_timeout_loses_and_doubles_nothing():
    """The reported failure: Redis paused (SIGSTOP) past socket_timeout while a producer and a consumer run."""
    total, job = 60, "stalled"
    with RedisServer(use_env=False) as server:
        options = {"socket_timeout": 0.5, "visibility_timeout": 1.5, "reconnect": ReconnectPolicy(0.02, 0.2, 60.0)}
        seen: list[tuple[int, bool, int]] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def produce() -> None:
            try:
                with SubgraphPool(server.url, job, capacity=8, **options) as pool:
                    for seq in range(total):
                        pool.put(sg(seq, job), timeout=60)
                        time.sleep(0.01)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        def consume() -> None:
            try:
                with SubgraphPool(server.url, job, capacity=8, **options) as pool:
                    while not stop.is_set():
                        entry = pool.get("trainer", timeout=0.2)
                        if entry is None:
                            continue
                        sub = entry.subgraph
                        seen.append((sub.sequence, sub.equals(sg(sub.sequence, job)), entry.deliveries))
                        pool.ack(entry.entry_id, wait=False)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(seen) < 10:  # both are busy: some call is in flight when Redis stops
            assert time.monotonic() < deadline and not errors, errors
            time.sleep(0.01)
        os.kill(server.pid, signal.SIGSTOP)
        time.sleep(2.0)  # four socket timeouts
        os.kill(server.pid, signal.SIGCONT)
        threads[0].join(60)
        watcher = SubgraphPool(server.url, job)
        deadline = time.monotonic() + 30
        while {seq for seq, _, _ in seen} != set(range(total)):
            assert time.monotonic() < deadline, f"never delivered: {set(range(total)) - {s for s, _, _ in seen}}"
            assert not errors, errors
            time.sleep(0.05)
        deadline = time.monotonic() + 10
        while watcher.stats().held:  # the last queued acknowledgement is on its way
            assert time.monotonic() < deadline, watcher.stats()
            time.sleep(0.05)
        stop.set()
        threads[1].join(30)
        assert not errors, errors
        assert all(intact for _, intact, _ in seen), "a subgraph arrived damaged"
        s = watcher.stats()
        # Each subgraph put once, delivered whole; an entry whose get reply was lost comes back to the
        # consumer after the visibility timeout (at least once), never as missing bytes.
        assert (s.produced, s.dead_lettered, s.held) == (total, 0, 0), s
        assert s.produced == s.acknowledged + s.depth + s.pending + s.dead_lettered
        assert watcher.dead_letters() == []
        watcher.close()
