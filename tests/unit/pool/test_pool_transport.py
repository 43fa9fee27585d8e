"""Choosing the pool's transport, and slot references (pure logic, no server)."""

from __future__ import annotations

import pytest

from saintpipe.core.errors import ConfigError, DecodeError, InvalidArgument
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.pool import resolve_transport
from saintpipe.services.pool.shared_memory import SlotReference, SlotWriter


@pytest.mark.parametrize(
    "url, local",
    [
        ("redis://:pw@127.0.0.1:6379/0", True),
        ("redis://localhost:6379", True),
        ("redis://127.0.0.2:7000/1", True),
        ("redis://[::1]:6379/0", True),
        ("unix:///run/redis.sock?db=0", True),
        ("redis://redis:6379/0", False),  # compose's service name: another container
        ("rediss://cache.example.com:6380/0", False),
        ("redis://10.0.0.5:6379/0", False),
    ],
)
def test_auto_picks_shared_memory_only_for_a_loopback_redis(url, local, tmp_path, monkeypatch):
    monkeypatch.setattr(shared_memory, "SHM_DIR", tmp_path)
    assert shared_memory.is_local(url) is local
    assert resolve_transport("auto", url) == ("shared_memory" if local else "redis")
    assert resolve_transport("redis", url) == "redis"
    assert resolve_transport("shared_memory", url) == "shared_memory"


def test_auto_falls_back_to_redis_without_a_usable_shm_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(shared_memory, "SHM_DIR", tmp_path / "missing")
    assert resolve_transport("auto", "redis://127.0.0.1:6379/0") == "redis"
    with pytest.raises(ConfigError, match="missing or not writable.*'redis'"):
        SlotWriter("redis://127.0.0.1:6379/0", "job")


def test_an_unknown_transport_is_refused():
    with pytest.raises(InvalidArgument, match="transport 'tcp'.*auto, redis, shared_memory"):
        resolve_transport("tcp", "redis://127.0.0.1:6379/0")


def test_server_tags_tell_servers_apart():
    tags = {shared_memory.server_tag(u) for u in (
        "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6380/0", "redis://127.0.0.1:6379/1",
        "unix:///a.sock", "unix:///b.sock")}
    assert len(tags) == 5
    assert shared_memory.server_tag("redis://:secret@127.0.0.1:6379/0") == shared_memory.server_tag(
        "redis://127.0.0.1:6379/0")  # the password does not matter


def test_a_reference_round_trips_and_is_never_a_subgraph_message():
    ref = SlotReference("ab" * 16, "saintpipe-pool-0123abcd-cora.gcn:1+4026531836-4242-123456-0123abcd-7", 1234)
    payload = ref.encode()
    assert shared_memory.is_reference(payload) and shared_memory.is_reference(memoryview(payload))
    assert SlotReference.parse(payload) == ref
    from saintpipe.services.pool.codec import encode_subgraph
    from saintpipe.services.pool.synthetic import random_subgraph

    assert not shared_memory.is_reference(encode_subgraph(random_subgraph(5, 8, seed=0)))


@pytest.mark.parametrize(
    "body, why",
    [
        (b"ns only-two", "malformed"),
        (b"ns saintpipe-pool-0123abcd-j+0123456789abcdef-1 many", "malformed"),
        (b"ns ../../etc/passwd 10", "not a pool slot"),
        (b"ns saintpipe-features-1-2-ab 10", "not a pool slot"),
        (b"ns saintpipe-pool-0123abcd-j+0123456789abcdef-1 -5", "not a pool slot"),
        (b"\xff\xfe saintpipe-pool-0123abcd-j+0123456789abcdef-1 5", "malformed"),
    ],
)
def test_malformed_or_foreign_references_are_refused(body, why):
    with pytest.raises(DecodeError, match=why):
        SlotReference.parse(shared_memory.MAGIC + body)


def test_slot_writer_frees_exactly_the_slots_of_entries_gone(tmp_path):
    writer = SlotWriter("redis://127.0.0.1:6379/0", "book", directory=tmp_path)

    def put(entry_id: str) -> int:
        slot, _ = writer.write(lambda allocate: _write(allocate, b"x" * 10))
        writer.committed(slot, entry_id)
        return slot

    slots = {eid: put(eid) for eid in ("1-0", "2-0", "3-0", "4-0")}
    assert writer.slots == 4 and not writer._free
    assert writer.oldest(2) == ["1-0", "2-0"] and writer.oldest(10) == ["1-0", "2-0", "3-0", "4-0"]
    writer.gone(["2-0"])  # not at the front: found all the same
    assert writer.oldest(10) == ["1-0", "3-0", "4-0"] and writer._free
    writer.gone(["1-0", "3-0", "9-0"])  # the front, and one it never had
    assert writer.oldest(10) == ["4-0"]
    reused = {put(eid) for eid in ("5-0", "6-0", "7-0")}
    assert reused == {slots["1-0"], slots["2-0"], slots["3-0"]} and writer.slots == 4  # no new file
    writer.gone([])
    assert writer.oldest(10) == ["4-0", "5-0", "6-0", "7-0"]
    writer.close()
    assert len(list(tmp_path.glob(f"{shared_memory.PREFIX}*+*"))) == 4  # every slot is named by an entry: kept


def test_slot_writer_close_removes_the_slots_no_entry_names(tmp_path):
    writer = SlotWriter("redis://127.0.0.1:6379/0", "close", directory=tmp_path)
    held, _ = writer.write(lambda allocate: _write(allocate, b"held"))
    writer.committed(held, "1-0")
    spare, _ = writer.write(lambda allocate: _write(allocate, b"spare"))
    writer.release(spare)  # its put failed: free again
    writer.close()
    assert [p.name.endswith(f"-{held}") for p in tmp_path.glob(f"{shared_memory.PREFIX}*+*")] == [True]


def _write(allocate, data: bytes) -> int:
    import numpy as np

    allocate(len(data))[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return len(data)
