"""Pool basics on a real Redis: stats, delete_job, authentication, leases (dead letters: test_pool_dead_letters)."""

from __future__ import annotations

import time

import pytest

from saintpipe.core.errors import AuthenticationFailed
from saintpipe.services.pool.pool import SubgraphPool
from tests.support.pool import numbered_subgraphs

sg = numbered_subgraphs(job="basics")


def job_keys(client, job: str) -> set[str]:
    return {k.decode() for k in client.scan_iter(match=f"saintpipe:pool:{{{job}}}*")}


def test_stats_follow_put_get_ack_and_redelivery(redis_server):
    pool = SubgraphPool(redis_server.url, "basics", capacity=10, visibility_timeout=0.3)
    assert pool.stats().held == 0 and pool.stats().produced == 0
    ids = [pool.put(sg(i)) for i in range(4)]
    assert len(set(ids)) == 4
    s = pool.stats()
    assert (s.depth, s.pending, s.produced, s.acknowledged, s.redelivered, s.capacity) == (4, 0, 4, 0, 0, 10)

    first = pool.get("a", timeout=1)
    second = pool.get("a", timeout=1)
    assert [first.subgraph.sequence, second.subgraph.sequence] == [0, 1]  # oldest first
    s = pool.stats()
    assert (s.depth, s.pending) == (2, 2)
    assert pool.ack(first.entry_id) is True
    assert pool.ack(first.entry_id) is False  # a second ack changes nothing
    time.sleep(0.4)  # "a" now holds `second` longer than the visibility timeout
    again = pool.get("b", timeout=1)
    assert again.entry_id == second.entry_id and again.deliveries == 2
    assert again.subgraph.equals(sg(1))
    s = pool.stats()
    assert (s.depth, s.pending, s.produced, s.acknowledged, s.redelivered) == (2, 1, 4, 1, 1)
    pool.close()


def test_touch_keeps_a_long_step_from_being_redelivered(redis_server):
    pool = SubgraphPool(redis_server.url, "lease", visibility_timeout=0.5)
    pool.put(sg(0, "lease"))
    entry = pool.get("slow", timeout=1)
    for _ in range(3):
        time.sleep(0.3)
        assert pool.touch("slow", entry.entry_id) is True
    assert pool.get("other", timeout=0) is None  # still leased to "slow"
    assert pool.touch("other", entry.entry_id) is False  # cannot take it over by touching
    assert pool.ack(entry.entry_id) is True
    assert pool.touch("slow", entry.entry_id) is False
    pool.close()


def test_get_times_out_with_none_on_an_empty_pool(redis_server):
    pool = SubgraphPool(redis_server.url, "empty")
    assert pool.get("t", timeout=0) is None
    assert pool.get("t", timeout=0.3) is None
    pool.close()


def test_delete_job_removes_everything_and_only_that_job(redis_server):
    client = redis_server.client()
    doomed = SubgraphPool(redis_server.url, "doomed")
    kept = SubgraphPool(redis_server.url, "kept")
    kept.put(sg(0, "kept"))
    doomed.put(sg(0, "doomed"))
    doomed.put(sg(1, "doomed"))
    assert doomed.get("t", timeout=1) is not None  # one pending, one waiting
    # An upload left by a producer that died while waiting for room.
    client.set("saintpipe:pool:{doomed}:sg:orphan", b"x", px=60_000)
    assert len(job_keys(client, "doomed")) == 6  # stream, counters, at, two subgraphs, the orphan
    assert doomed.delete_job() == 6
    assert job_keys(client, "doomed") == set()
    assert doomed.stats().produced == 0 and doomed.stats().held == 0
    assert kept.get("t", timeout=1).subgraph.equals(sg(0, "kept"))
    client.close()
    doomed.close()
    kept.close()


def test_wrong_or_missing_password_is_a_clear_error(redis_server):
    wrong = f"redis://:wrong-password@127.0.0.1:{redis_server.port}/0"
    with pytest.raises(AuthenticationFailed, match="refused the credentials.*Check the password") as info:
        SubgraphPool(wrong, "auth")
    assert "wrong-password" not in str(info.value)
    with pytest.raises(AuthenticationFailed):
        SubgraphPool(f"redis://127.0.0.1:{redis_server.port}/0", "auth")


def test_password_protected_server_works_with_the_right_password(redis_server):
    assert redis_server.password and f":{redis_server.password}@" in redis_server.url
    with SubgraphPool(redis_server.url, "auth-ok") as pool:
        pool.put(sg(0, "auth-ok"))
        assert pool.get("t", timeout=1).subgraph.equals(sg(0, "auth-ok"))
