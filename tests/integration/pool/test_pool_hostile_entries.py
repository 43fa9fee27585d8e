"""Entries and records written by something else are data, not trusted (issue 19, finding 1).

An entry's field k, or the job's ``at`` hash, may name any key: another job's
stream, the job's own counters, a key outside saintpipe. The pool renames,
reads or deletes only the job's own subgraph bytes; an entry naming anything
else is dead-lettered with a reason naming the key. A fixed key of the job
replaced by another type is answered with ``StateCorrupted`` naming the key,
not a raw Lua error.
"""

from __future__ import annotations

import threading
import time

import pytest

from saintpipe.core.errors import StateCorrupted
from saintpipe.services.pool.pool import SubgraphPool
from tests.support.pool import assert_balanced, sg


def key(job: str, name: str) -> str:
    return f"saintpipe:pool:{{{job}}}:{name}"


def crafted(client, job: str, fields: dict) -> str:
    """An entry written by hand into the job's stream (counted as produced, as a put would be)."""
    entry_id = client.xadd(key(job, "stream"), fields).decode()
    client.hincrby(key(job, "counters"), "produced", 1)
    return entry_id


def only_letter(pool: SubgraphPool, entry_id: str) -> str:
    letters = [letter for letter in pool.dead_letters() if letter.entry_id == entry_id]
    assert len(letters) == 1, pool.dead_letters()
    return letters[0].reason


@pytest.fixture
def client(redis_server):
    c = redis_server.client()
    yield c
    c.close()


def test_an_entry_naming_another_jobs_stream_leaves_that_job_working(redis_server, client):
    victim = SubgraphPool(redis_server.url, "victim")
    victim.put(sg(0, "victim"))
    pool = SubgraphPool(redis_server.url, "crafty")
    pool.get("t", timeout=0)  # creates the stream and its group
    bad = crafted(client, "crafty", {"k": key("victim", "stream")})
    pool.put(sg(1, "crafty"))
    entry = pool.get("t", timeout=1)  # the crafted entry is set aside on the way, not raised
    assert entry.subgraph.equals(sg(1, "crafty"))
    assert only_letter(pool, bad) == (
        "its bytes key 'saintpipe:pool:{victim}:stream' is not one of job crafty's subgraph keys"
    )
    assert client.type(key("victim", "stream")) == b"stream" and client.xlen(key("victim", "stream")) == 1
    other = SubgraphPool(redis_server.url, "victim")  # the victim's own consumers still get its entry
    got = other.get("t", timeout=1)
    assert got.subgraph.equals(sg(0, "victim")) and other.ack(got.entry_id)
    pool.ack(entry.entry_id)
    assert_balanced(pool)
    for p in (victim, pool, other):
        p.close()


def test_an_entry_without_field_k_is_dead_lettered_and_its_first_field_is_not_used(redis_server, client):
    victim = SubgraphPool(redis_server.url, "victim2")
    victim.put(sg(0, "victim2"))
    pool = SubgraphPool(redis_server.url, "nok")
    pool.get("t", timeout=0)
    bad = crafted(client, "nok", {"nonsense": key("victim2", "stream")})
    assert pool.get("t", timeout=0.2) is None
    assert only_letter(pool, bad) == "its bytes are missing: its entry has no field k naming them"
    assert client.xlen(key("victim2", "stream")) == 1
    assert victim.get("t", timeout=1).subgraph.equals(sg(0, "victim2"))
    victim.close()
    pool.close()


def test_entries_naming_the_jobs_own_fixed_keys_touch_none_of_them(redis_server, client):
    job = "own"
    pool = SubgraphPool(redis_server.url, job, visibility_timeout=30)
    pool.put(sg(0, job))
    held = pool.get("t", timeout=1)  # pending: the stream holds it and the at hash says where its bytes are
    first = crafted(client, job, {"k": key(job, "sg:never-written")})  # dead-letters once: the dead stream exists
    assert pool.get("t", timeout=0.2) is None
    assert only_letter(pool, first) == "its bytes are missing from Redis"
    before = {name: client.type(key(job, name)) for name in ("stream", "counters", "at", "dead")}
    assert before == {"stream": b"stream", "counters": b"hash", "at": b"hash", "dead": b"stream"}
    for name in ("counters", "at", "dead", "stream"):
        counters = client.hgetall(key(job, "counters"))
        bad = crafted(client, job, {"k": key(job, name)})
        assert pool.get("t", timeout=0.2) is None
        assert only_letter(pool, bad) == f"its bytes key '{key(job, name)}' is not one of job own's subgraph keys"
        assert {n: client.type(key(job, n)) for n in before} == before, name
        after = client.hgetall(key(job, "counters"))
        assert int(after[b"produced"]) == int(counters[b"produced"]) + 1  # only the crafted entry counted
        assert int(after[b"dead_lettered"]) == int(counters[b"dead_lettered"]) + 1
    assert client.hget(key(job, "at"), held.entry_id) is not None
    assert pool.ack(held.entry_id)
    s = pool.stats()
    assert (s.produced, s.acknowledged, s.dead_lettered, s.held) == (6, 1, 5, 0)
    pool.close()


def test_an_entry_naming_a_key_outside_saintpipe_leaves_it_as_it_was(redis_server, client):
    client.set("user:precious", b"precious value")
    pool = SubgraphPool(redis_server.url, "outside")
    pool.get("t", timeout=0)
    bad = crafted(client, "outside", {"k": "user:precious"})
    assert pool.get("t", timeout=0.2) is None
    assert only_letter(pool, bad) == "its bytes key 'user:precious' is not one of job outside's subgraph keys"
    assert client.get("user:precious") == b"precious value" and client.ttl("user:precious") == -1
    assert_balanced(pool)
    pool.close()


def test_an_entry_arriving_during_a_blocking_read_is_checked_too(redis_server, client):
    client.set("user:precious", b"precious value")
    pool = SubgraphPool(redis_server.url, "blocked")
    pool.get("t", timeout=0)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(pool.get("t", timeout=3)))
    reader.start()
    # Added only once the consumer waits in XREADGROUP BLOCK: the entry reaches it through the blocking read.
    deadline = time.monotonic() + 5
    while int(client.info("clients")["blocked_clients"]) == 0:
        assert time.monotonic() < deadline, "the consumer never blocked"
        time.sleep(0.01)
    bad = crafted(client, "blocked", {"k": "user:precious"})
    reader.join()
    assert got == [None]
    assert only_letter(pool, bad) == "its bytes key 'user:precious' is not one of job blocked's subgraph keys"
    assert client.get("user:precious") == b"precious value"
    pool.close()


@pytest.mark.parametrize("kind", ["hash", "list", "set", "stream"])
def test_a_subgraph_key_holding_another_type_is_not_touched(redis_server, client, kind):
    job = f"typed-{kind}"
    bytes_key = key(job, "sg:typed")
    make = {
        "hash": lambda: client.hset(bytes_key, "f", "v"),
        "list": lambda: client.rpush(bytes_key, "a", "b"),
        "set": lambda: client.sadd(bytes_key, "a"),
        "stream": lambda: client.xadd(bytes_key, {"f": "v"}),
    }
    make[kind]()
    dump = client.dump(bytes_key)
    pool = SubgraphPool(redis_server.url, job)
    pool.get("t", timeout=0)
    bad = crafted(client, job, {"k": bytes_key})
    pool.put(sg(0, job))
    entry = pool.get("t", timeout=1)
    assert entry.subgraph.equals(sg(0, job))
    assert only_letter(pool, bad) == f"its bytes key '{bytes_key}' holds a {kind}, not subgraph bytes"
    assert client.dump(bytes_key) == dump  # same type, same contents
    pool.ack(entry.entry_id)
    assert_balanced(pool)
    pool.close()


def test_an_ack_whose_at_record_names_a_foreign_key_does_not_delete_it(redis_server, client):
    job = "ackat"
    client.set("user:precious", b"precious value")
    victim = SubgraphPool(redis_server.url, "victim3")
    victim.put(sg(0, "victim3"))
    pool = SubgraphPool(redis_server.url, job)
    for i, foreign in enumerate(["user:precious", key("victim3", "stream"), key(job, "counters")]):
        pool.put(sg(i, job))
        entry = pool.get("t", timeout=1)
        client.hset(key(job, "at"), entry.entry_id, foreign)
        assert pool.ack(entry.entry_id)
    assert client.get("user:precious") == b"precious value"
    assert client.xlen(key("victim3", "stream")) == 1
    s = pool.stats()
    assert (s.produced, s.acknowledged, s.held) == (3, 3, 0)
    assert victim.get("t", timeout=1).subgraph.equals(sg(0, "victim3"))
    victim.close()
    pool.close()


def test_a_redelivery_whose_at_record_names_a_foreign_key_is_dead_lettered(redis_server, client):
    job = "claimat"
    victim = SubgraphPool(redis_server.url, "victim4")
    victim.put(sg(0, "victim4"))
    pool = SubgraphPool(redis_server.url, job, visibility_timeout=0.1, max_deliveries=0)
    pool.put(sg(0, job))
    first = pool.get("a", timeout=1)
    client.hset(key(job, "at"), first.entry_id, key("victim4", "stream"))
    time.sleep(0.2)  # "a" held it past the visibility timeout: "b" takes it over
    assert pool.get("b", timeout=0.3) is None
    assert only_letter(pool, first.entry_id) == (
        "its bytes key 'saintpipe:pool:{victim4}:stream' is not one of job claimat's subgraph keys"
    )
    assert client.xlen(key("victim4", "stream")) == 1
    assert victim.get("t", timeout=1).subgraph.equals(sg(0, "victim4"))
    victim.close()
    pool.close()


def test_recover_drops_an_orphan_record_without_deleting_the_key_it_names(redis_server, client):
    job = "orphan"
    client.set("user:precious", b"precious value")
    pool = SubgraphPool(redis_server.url, job)
    pool.put(sg(0, job))
    entry = pool.get("t", timeout=1)
    client.xdel(key(job, "stream"), entry.entry_id)  # pending, but its entry deleted by hand
    client.hset(key(job, "at"), entry.entry_id, "user:precious")
    assert pool.recover("t") == 0
    assert client.get("user:precious") == b"precious value"
    assert client.hget(key(job, "at"), entry.entry_id) is None  # the record went
    pool.close()


def wrong_type_message(job: str, name: str, found: str, expected: str) -> str:
    return (
        f"pool job {job}: key {key(job, name)} holds a {found}, not a {expected}; it was changed outside "
        "saintpipe (delete it, or use another job id)"
    )


@pytest.mark.parametrize(
    "name, expected, calls",
    [
        ("stream", "stream", ["get", "put", "stats", "ack", "recover", "touch"]),
        ("counters", "hash", ["get", "put", "stats", "ack", "recover"]),
        ("at", "hash", ["get", "put", "ack", "recover"]),
    ],
)
def test_a_fixed_key_replaced_by_a_string_is_the_pools_own_error(redis_server, client, name, expected, calls):
    job = f"replaced-{name}"
    pool = SubgraphPool(redis_server.url, job)
    pool.put(sg(0, job))
    entry = pool.get("t", timeout=1)
    client.delete(key(job, name))
    client.set(key(job, name), "x")
    attempts = {
        "get": lambda: pool.get("t", timeout=0),
        "put": lambda: pool.put(sg(1, job), timeout=0),
        "stats": pool.stats,
        "ack": lambda: pool.ack(entry.entry_id),
        "recover": lambda: pool.recover("t"),
        "touch": lambda: pool.touch("t", entry.entry_id),
    }
    for call in calls:
        with pytest.raises(StateCorrupted) as raised:
            attempts[call]()
        message = str(raised.value)
        assert message == wrong_type_message(job, name, "string", expected), call
        assert "script" not in message and "@" not in message, message
    assert client.get(key(job, name)) == b"x"  # the key is left for the user to look at
    pool.close()


def test_a_dead_letter_stream_replaced_by_a_string_is_the_pools_own_error(redis_server, client):
    job = "replaced-dead"
    pool = SubgraphPool(redis_server.url, job)
    pool.get("t", timeout=0)
    client.set(key(job, "dead"), "x")
    crafted(client, job, {"k": key(job, "sg:never-written")})
    expected = wrong_type_message(job, "dead", "string", "stream")
    with pytest.raises(StateCorrupted) as raised:
        pool.get("t", timeout=0)  # the bad entry would be dead-lettered
    assert str(raised.value) == expected
    with pytest.raises(StateCorrupted) as raised:
        pool.dead_letters()
    assert str(raised.value) == expected
    pool.close()
