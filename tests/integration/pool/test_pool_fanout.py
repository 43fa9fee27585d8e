"""Fan-out: one job's stream read by several consumer groups (a sweep's trials), each seeing every entry once."""

from __future__ import annotations

import random
import threading
import time

import pytest

from saintpipe.core.errors import InvalidArgument, SaintpipeTimeout
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.pool import SubgraphPool
from tests.support.pool import numbered_subgraphs

sg = numbered_subgraphs(12, 30)


def pools(url: str, job: str, groups: list[str], **kwargs) -> tuple[SubgraphPool, dict[str, SubgraphPool]]:
    """A producer's pool object, which registers ``groups``, and one consumer pool object per group."""
    producer = SubgraphPool(url, job, **kwargs)
    for group in groups:
        assert producer.add_group(group) is True
    assert producer.groups() == sorted(groups)
    return producer, {g: SubgraphPool(url, job, group=g, **kwargs) for g in groups}


def balanced(pool: SubgraphPool, group: str) -> None:
    s = pool.stats(group=group)
    assert s.produced == s.acknowledged + s.depth + s.pending + s.dead_lettered, (group, s)


def leftovers(client, job: str) -> tuple[int, list[bytes]]:
    """Subgraph byte keys left, and the at hash's per-entry fields (counts, group copies)."""
    keys = list(client.scan_iter(match=f"saintpipe:pool:{{{job}}}:sg:*"))
    fields = [f for f in client.hkeys(f"saintpipe:pool:{{{job}}}:at") if not f.startswith(b"saintpipe:")]
    return len(keys), fields


def put_in_background(url: str, job: str, capacity: int, subgraph) -> threading.Event:
    """A producer's put on a thread of its own (it may wait for room); the event is set once it returned."""
    done = threading.Event()

    def put() -> None:
        with SubgraphPool(url, job, capacity=capacity) as pool:
            pool.put(subgraph)
        done.set()

    threading.Thread(target=put, daemon=True).start()
    return done


@pytest.mark.parametrize("n", [2, 3])
def test_every_group_sees_every_entry_exactly_once(redis_server, n):
    job = f"fan{n}"
    groups = [f"trial-{i}" for i in range(n)]
    producer, consumers = pools(redis_server.url, job, groups, capacity=64)
    originals = {producer.put(sg(i, job)): sg(i, job) for i in range(10)}
    client = redis_server.client()
    for group, pool in consumers.items():
        seen = []
        while (entry := pool.get(f"{group}-t", timeout=0)) is not None:
            assert entry.subgraph.equals(originals[entry.entry_id]) and entry.deliveries == 1
            seen.append(entry.entry_id)
            pool.ack(entry.entry_id)
        assert sorted(seen) == sorted(originals), group
        s = pool.stats()
        assert (s.produced, s.acknowledged, s.depth, s.pending) == (10, 10, 0, 0)
        # Still held for the groups that have not acknowledged yet; gone after the last.
        assert client.xlen(producer.stream_key) == (0 if group == groups[-1] else 10)
    assert leftovers(client, job) == (0, [])


def test_each_group_reads_its_own_copy_and_the_last_one_renames(redis_server):
    producer, c = pools(redis_server.url, "copies", ["a", "b"])
    entry_id = producer.put(sg(0, "copies"))
    client = redis_server.client()
    a = c["a"].get("x", timeout=0)
    b = c["b"].get("x", timeout=0)
    assert a.subgraph.equals(b.subgraph)
    assert leftovers(client, "copies")[0] == 3  # the entry's bytes and a copy per group
    c["b"].ack(b.entry_id)
    assert leftovers(client, "copies")[0] == 2 and client.xlen(producer.stream_key) == 1
    c["a"].ack(entry_id)
    assert leftovers(client, "copies") == (0, []) and client.xlen(producer.stream_key) == 0


def test_backpressure_follows_the_slowest_group(redis_server):
    producer, c = pools(redis_server.url, "slow", ["fast", "slow"], capacity=3)
    for i in range(3):
        producer.put(sg(i, "slow"), timeout=0)
    for _ in range(3):
        c["fast"].ack(c["fast"].get("f", timeout=0).entry_id)
    assert c["fast"].stats().held == 0 and c["slow"].stats().depth == 3
    with pytest.raises(SaintpipeTimeout):
        producer.put(sg(3, "slow"), timeout=0.3)

    done = put_in_background(redis_server.url, "slow", 3, sg(4, "slow"))
    assert not done.wait(0.5), "put returned although the slow group held capacity entries"
    entry = c["slow"].get("s", timeout=0)
    assert not done.wait(0.3), "a delivered entry still counts"
    c["slow"].ack(entry.entry_id)
    assert done.wait(5), "the slow group's acknowledgement made no room"
    for group in ("fast", "slow"):
        balanced(producer, group)


def test_removing_the_slow_group_releases_its_entries_and_unblocks_the_producer(redis_server):
    producer, c = pools(redis_server.url, "gone", ["fast", "slow"], capacity=4)
    for i in range(4):
        producer.put(sg(i, "gone"), timeout=0)
    for _ in range(4):
        c["fast"].ack(c["fast"].get("f", timeout=0).entry_id)
    held = c["slow"].get("s", timeout=0)  # one delivered and pending (its bytes copied), three never delivered
    assert held is not None
    done = put_in_background(redis_server.url, "gone", 4, sg(9, "gone"))
    assert not done.wait(0.3)
    started = time.monotonic()
    assert producer.remove_group("slow") == 4
    assert done.wait(2) and time.monotonic() - started < 1.0
    assert producer.groups() == ["fast"]
    client = redis_server.client()
    assert client.xlen(producer.stream_key) == 1  # the new entry, for "fast" only
    assert leftovers(client, "gone")[0] == 1
    entry = c["fast"].get("f", timeout=0)
    assert entry.subgraph.equals(sg(9, "gone"))
    c["fast"].ack(entry.entry_id)
    assert leftovers(client, "gone") == (0, [])
    assert producer.remove_group("slow") == 0  # gone already


def test_a_group_added_later_sees_only_what_comes_after(redis_server):
    producer, c = pools(redis_server.url, "late", ["early"])
    producer.put(sg(0, "late"))
    assert producer.add_group("late") is True and producer.add_group("late") is False
    later = SubgraphPool(redis_server.url, "late", group="late")
    producer.put(sg(1, "late"))
    assert later.get("l", timeout=0).subgraph.equals(sg(1, "late"))
    assert later.get("l", timeout=0) is None
    assert later.stats().produced == 1 and c["early"].stats().produced == 2
    balanced(producer, "late")
    balanced(producer, "early")


def test_redelivery_and_dead_letters_are_per_group(redis_server):
    producer, c = pools(redis_server.url, "redo", ["a", "b"], visibility_timeout=0.3, max_deliveries=2)
    entry_id = producer.put(sg(0, "redo"))
    assert c["a"].get("dies", timeout=0).entry_id == entry_id  # never acknowledged
    b = c["b"].get("lives", timeout=0)
    c["b"].ack(b.entry_id)
    time.sleep(0.4)
    again = c["a"].get("second", timeout=0)
    assert (again.entry_id, again.deliveries) == (entry_id, 2)
    assert c["a"].stats().redelivered == 1 and c["b"].stats().redelivered == 0
    time.sleep(0.4)  # "second" died too: a third delivery exceeds max_deliveries for a: dead-lettered
    assert c["a"].get("third", timeout=0) is None
    sa, sb = c["a"].stats(), c["b"].stats()
    assert (sa.dead_lettered, sa.acknowledged, sb.dead_lettered, sb.acknowledged) == (1, 0, 0, 1)
    [letter] = producer.dead_letters()
    assert (letter.entry_id, letter.group) == (entry_id, "a")
    assert leftovers(redis_server.client(), "redo") == (0, [])  # a's dead letter was the last release


def test_a_dead_letter_of_one_group_leaves_the_entry_to_the_others(redis_server):
    producer, c = pools(redis_server.url, "dl", ["a", "b"], visibility_timeout=0.2, max_deliveries=1)
    entry_id = producer.put(sg(0, "dl"))
    c["a"].get("dies", timeout=0)
    time.sleep(0.25)
    c["a"].get("again", timeout=0)
    time.sleep(0.25)
    assert c["a"].get("third", timeout=0) is None  # dead-lettered for a
    entry = c["b"].get("b", timeout=0)
    assert entry.entry_id == entry_id and entry.subgraph.equals(sg(0, "dl"))
    c["b"].ack(entry.entry_id)
    assert leftovers(redis_server.client(), "dl") == (0, [])
    for group in ("a", "b"):
        balanced(producer, group)


def test_accounts_add_up_per_group_after_random_interleavings(redis_server):
    rng = random.Random(7)
    groups = ["g0", "g1", "g2"]
    producer, c = pools(redis_server.url, "mix", groups, capacity=8, visibility_timeout=0.05, max_deliveries=3)
    held: dict[str, list[str]] = {g: [] for g in groups}
    seq = 0
    for _ in range(300):
        move = rng.random()
        group = rng.choice(groups)
        if move < 0.3:
            try:
                producer.put(sg(seq, "mix"), timeout=0)
                seq += 1
            except SaintpipeTimeout:
                pass
        elif move < 0.6:
            entry = c[group].get(rng.choice(["x", "y"]), timeout=0)
            if entry is not None:
                held[group].append(entry.entry_id)
        elif move < 0.85 and held[group]:
            c[group].ack(held[group].pop(rng.randrange(len(held[group]))), wait=rng.random() < 0.5)
        elif move < 0.9:
            time.sleep(0.06)  # let held entries become abandoned
        c[group].flush_acks()
        for g in groups:
            balanced(producer, g)
            assert c[g].stats().held <= 8
    assert producer.stats(group="g0").produced == seq
    for group in groups:  # drain: everything comes back to someone and is acknowledged
        time.sleep(0.06)
        while (entry := c[group].get("drain", timeout=0)) is not None:
            c[group].ack(entry.entry_id)
        balanced(producer, group)
        assert c[group].stats().held == 0
    assert leftovers(redis_server.client(), "mix") == (0, [])


def test_the_default_group_and_bad_names(redis_server):
    pool = SubgraphPool(redis_server.url, "names")
    assert pool.groups() == []
    with pytest.raises(InvalidArgument):
        SubgraphPool(redis_server.url, "names", group="a@b")
    with pytest.raises(InvalidArgument):
        pool.add_group("")
    assert "group=" not in repr(pool) and "group='t'" in repr(SubgraphPool(redis_server.url, "names", group="t"))


def test_shared_memory_slots_are_released_only_after_the_last_group(redis_server, shm_dir):
    producer, c = pools(redis_server.url, "fshm", ["a", "b"], capacity=16)
    writer = SubgraphPool(redis_server.url, "fshm", transport="shared_memory", capacity=16)
    first = sg(0, "fshm", nodes=40, edges=160)
    first_id = writer.put(first)
    c["a"].ack(c["a"].get("a", timeout=0).entry_id)
    client = redis_server.client()
    held_first = False
    for i in range(1, 12):  # both groups consume these at once: their slots are reused
        writer.put(sg(i, "fshm", nodes=40, edges=160))
        for group in ("a", "b"):
            pool = c[group]
            entry = pool.get(group, timeout=0)
            if group == "b" and entry.entry_id == first_id:  # b leaves the first one for later
                entry = pool.get(group, timeout=0)
                pool.ack(entry.entry_id)
                held_first = True
                continue
            pool.ack(entry.entry_id)
    assert held_first
    assert client.xlen(producer.stream_key) == 1
    files = sorted(p.name for p in shm_dir.glob(f"{shared_memory.PREFIX}*fshm+*"))
    assert len(files) >= 2  # the first entry's slot was never reused
    # b reads the first entry from its slot now, intact
    again = c["b"].recover("b")
    assert again == 1
    entry = c["b"].get("b", timeout=0)
    assert entry.entry_id == first_id and entry.subgraph.equals(first)
    c["b"].ack(entry.entry_id)
    assert client.xlen(producer.stream_key) == 0
    writer.close()


def snapshot(client, job: str) -> tuple:
    """Everything the job stores in Redis (its stream's entries, its hashes, its subgraph bytes)."""
    prefix = f"saintpipe:pool:{{{job}}}:"
    byte_keys = sorted(client.scan_iter(match=f"{prefix}sg:*"))
    return (
        client.xrange(f"{prefix}stream"),
        *(client.hgetall(f"{prefix}{name}") for name in ("at", "counters", "groups")),
        [(k, client.get(k)) for k in byte_keys],
    )


def refused_for_missing_group(call, job: str, group: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and f"pool job {job}:" in message and f"group {group!r}" in message, message
    assert "removed" in message and "never added" in message, message


def test_a_consumer_of_a_group_the_stream_lacks_gets_one_clear_error_and_nothing_changes(redis_server):
    producer, c = pools(redis_server.url, "nog", ["a", "b"], visibility_timeout=0.2)
    originals = {producer.put(sg(i, "nog")): sg(i, "nog") for i in range(3)}
    held = c["a"].get("a", timeout=0)  # a holds one (its copy of the bytes), b acknowledged one
    c["b"].ack(c["b"].get("b", timeout=0).entry_id)
    client = redis_server.client()
    before = snapshot(client, "nog")
    ghost = SubgraphPool(redis_server.url, "nog", group="ghost")  # never added
    removed = c["b"]
    assert producer.remove_group("b") == 0  # a still needs every entry
    after_removal = snapshot(client, "nog")
    time.sleep(0.25)  # a's entry is abandoned now: a claim would take it, if the script got that far
    for pool, group in ((ghost, "ghost"), (removed, "b")):
        calls = [
            lambda: pool.get("x", timeout=0),
            lambda: pool.get("x", timeout=0.3),
            lambda: pool.ack(held.entry_id),
            lambda: pool.recover("x"),
            lambda: pool.touch("x", held.entry_id),
            lambda: pool.stats(),
            lambda: producer.stats(group=group),
        ]
        for call in calls:
            refused_for_missing_group(call, "nog", group)
        pool.ack(held.entry_id, wait=False)  # queued: refused when sent, and only logged
        pool.flush_acks()
        refused_for_missing_group(lambda: pool.get("x", timeout=0), "nog", group)
        assert snapshot(client, "nog") == after_removal, group
    assert before[0] == after_removal[0]  # b's removal released nothing a still needs
    # a's entries are all there, intact: the one it held comes back to it, the others are new to it
    seen = {}
    while (entry := c["a"].get("a2", timeout=0)) is not None:
        seen[entry.entry_id] = entry
        c["a"].ack(entry.entry_id)
    assert sorted(seen) == sorted(originals) and seen[held.entry_id].deliveries == 2
    assert all(seen[i].subgraph.equals(originals[i]) for i in originals)
    assert leftovers(client, "nog") == (0, [])
    balanced(producer, "a")


def test_a_consumer_waiting_when_its_group_is_removed_gets_the_same_error(redis_server):
    producer, c = pools(redis_server.url, "nogwait", ["a", "b"])
    failure: list[BaseException] = []

    def waiting() -> None:
        try:
            c["b"].get("b", timeout=10)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            failure.append(exc)

    waiter = threading.Thread(target=waiting, daemon=True)
    waiter.start()
    time.sleep(0.3)  # blocked in its read
    assert producer.remove_group("b") == 0
    producer.put(sg(0, "nogwait"))  # wakes a read blocked on the group
    waiter.join(5)
    assert not waiter.is_alive() and len(failure) == 1
    refused_for_missing_group(lambda: (_ for _ in ()).throw(failure[0]), "nogwait", "b")
    entry = c["a"].get("a", timeout=0)
    assert entry.subgraph.equals(sg(0, "nogwait"))
    c["a"].ack(entry.entry_id)
    assert leftovers(redis_server.client(), "nogwait") == (0, [])


def test_removing_a_group_that_is_not_registered_is_refused_before_anything_changes(redis_server):
    producer = SubgraphPool(redis_server.url, "unreg", capacity=16)
    producer.put(sg(0, "unreg"))  # made the stream with the default group, which then stays unregistered
    for group in ("a", "b"):
        assert producer.add_group(group) is True
    c = {g: SubgraphPool(redis_server.url, "unreg", group=g) for g in ("a", "b")}
    originals = {producer.put(sg(i, "unreg")): sg(i, "unreg") for i in range(1, 5)}
    held = c["a"].get("a", timeout=0)
    client = redis_server.client()
    before = snapshot(client, "unreg")
    # "trainers" is on the stream and has never read anything: released for it, every entry would go
    for group in ("trainers", "ghost"):
        with pytest.raises(InvalidArgument) as caught:
            producer.remove_group(group)
        message = str(caught.value)
        assert message == (f"pool job unreg: cannot remove consumer group {group!r}: it is not registered "
                           "(registered: a, b); nothing was changed"), message
        assert snapshot(client, "unreg") == before
    assert producer.groups() == ["a", "b"]
    c["a"].ack(held.entry_id)
    for group, pool in c.items():
        seen = {}
        while (entry := pool.get(group, timeout=0)) is not None:
            seen[entry.entry_id] = entry.subgraph
            pool.ack(entry.entry_id)
        if group == "a":
            seen[held.entry_id] = held.subgraph
        assert sorted(seen) == sorted(originals), group
        assert all(seen[i].equals(originals[i]) for i in originals), group
        balanced(producer, group)
    assert client.xlen(producer.stream_key) == 1  # the one put before a and b joined: the default group's


def test_the_jobs_last_group_is_not_removed_and_a_removal_repeated_changes_nothing(redis_server):
    # A job with no group registered: its default group is its only one.
    solo = SubgraphPool(redis_server.url, "solo")
    first, second = solo.put(sg(0, "solo")), solo.put(sg(1, "solo"))
    assert solo.get("t", timeout=0).entry_id == first
    client = redis_server.client()
    before = snapshot(client, "solo")
    for group in ("trainers", "ghost"):
        refused = r"no group is registered .*default group 'trainers'.*delete_job"
        with pytest.raises(InvalidArgument, match=refused):
            solo.remove_group(group)
        assert snapshot(client, "solo") == before
    assert solo.ack(first) is True and solo.get("t", timeout=0).entry_id == second

    # A job that fans out: its last registered group stays, and what it holds with it.
    producer, c = pools(redis_server.url, "last", ["a", "b"], capacity=8)
    ids = [producer.put(sg(i, "last")) for i in range(3)]
    assert producer.remove_group("a") == 0  # b still needs them all
    before = snapshot(client, "last")
    with pytest.raises(InvalidArgument) as caught:
        producer.remove_group("b")
    assert str(caught.value) == (
        "pool job last: cannot remove consumer group 'b': it is the job's last registered group (add the "
        "next group first, or end the job with delete_job); nothing was changed"
    )
    assert snapshot(client, "last") == before and producer.groups() == ["b"]
    assert producer.remove_group("a") == 0 and snapshot(client, "last") == before  # removed already: nothing
    entry = c["b"].get("b", timeout=0)
    assert entry.entry_id == ids[0] and entry.subgraph.equals(sg(0, "last"))
    c["b"].ack(entry.entry_id)

    # Replacing it: the next group first, then the old one goes with what it held.
    assert producer.add_group("c") is True
    later = producer.put(sg(3, "last"))
    assert producer.remove_group("b") == 2  # ids[1], ids[2]: only b needed them
    assert producer.groups() == ["c"] and client.xlen(producer.stream_key) == 1
    c["c"] = SubgraphPool(redis_server.url, "last", group="c")
    entry = c["c"].get("c", timeout=0)
    assert entry.entry_id == later and entry.subgraph.equals(sg(3, "last"))
    c["c"].ack(entry.entry_id)
    assert leftovers(client, "last") == (0, [])

    # A removed group may be registered anew, and removed again.
    assert producer.add_group("a") is True and producer.groups() == ["a", "c"]
    producer.put(sg(4, "last"))
    assert producer.remove_group("a") == 0 and producer.groups() == ["c"]
    balanced(producer, "c")


def test_group_stats_and_the_gauges_show_each_groups_backlog(redis_server):
    from prometheus_client import CollectorRegistry

    from saintpipe.services.pool.keys import GROUP
    from saintpipe.services.pool.metrics import PoolMetrics

    plain = SubgraphPool(redis_server.url, "plain-gauges")
    plain.put(sg(0, "plain-gauges"))
    assert plain.group_stats() == {GROUP: plain.stats()} and plain.stats().depth == 1
    producer, consumers = pools(redis_server.url, "group-gauges", ["trial-a", "trial-b"], capacity=64)
    for i in range(6):
        producer.put(sg(i, "group-gauges"))
    for i in range(4):  # trial-a trains on 4 (3 acknowledged, 1 in hand); trial-b has not started
        entry = consumers["trial-a"].get("a-t", timeout=0)
        assert entry is not None
        if i < 3:
            consumers["trial-a"].ack(entry.entry_id)
    by_group = producer.group_stats()
    assert sorted(by_group) == ["trial-a", "trial-b"]
    assert (by_group["trial-a"].depth, by_group["trial-a"].pending, by_group["trial-a"].acknowledged) == (2, 1, 3)
    assert (by_group["trial-b"].depth, by_group["trial-b"].pending) == (6, 0)
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    metrics.update_groups("group-gauges", by_group)
    depth = lambda group: registry.get_sample_value(  # noqa: E731
        "saintpipe_pool_depth", {"job": "group-gauges", "group": group})
    assert (depth("trial-a"), depth("trial-b"), depth("")) == (2, 6, None)
    producer.add_group("trial-c")
    producer.remove_group("trial-a")  # its trial ended
    metrics.update_groups("group-gauges", producer.group_stats())
    assert (depth("trial-a"), depth("trial-b"), depth("trial-c")) == (None, 6, 0)
    for pool in (plain, producer, *consumers.values()):
        pool.close()
