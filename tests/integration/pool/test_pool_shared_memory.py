"""The pool's shared-memory transport on a real Redis: bytes in slot files, references in Redis."""

from __future__ import annotations

import re
import time

import pytest

from saintpipe.core.errors import ConfigError, SaintpipeTimeout
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.codec import encode_subgraph
from saintpipe.services.pool.pool import SubgraphPool
from tests.support.pool import numbered_subgraphs

sg = numbered_subgraphs(40, 160, job="shm")


def slots(directory, job: str = "") -> list[str]:
    return sorted(p.name for p in directory.glob(f"{shared_memory.PREFIX}*{job}+*"))


def bytes_keys(client, job: str) -> dict[str, int]:
    return {k.decode(): client.strlen(k) for k in client.scan_iter(match=f"saintpipe:pool:{{{job}}}:sg:*")}


def test_entries_travel_through_reused_slots_and_redis_holds_only_references(redis_server, shm_dir):
    producer = SubgraphPool(redis_server.url, "shm", transport="shared_memory", capacity=8)
    consumer = SubgraphPool(redis_server.url, "shm")  # a consumer reads either kind, whatever its own transport
    client = redis_server.client()
    assert producer.transport == "shared_memory" and consumer.transport == "redis"
    for i in range(30):
        original = sg(i, nodes=60 + i, edges=200 + 10 * i)  # sizes vary: slots are reused all the same
        producer.put(original)
        assert max(bytes_keys(client, "shm").values()) < 200  # a reference, not the ~kB subgraph
        entry = consumer.get("trainer", timeout=1)
        assert entry.subgraph.equals(original)
        assert consumer.ack(entry.entry_id) is True
    # Acknowledged entries free their slots: a put finds out and reuses them instead of creating more.
    assert 1 <= len(slots(shm_dir, "shm")) <= 3
    stats = producer.stats()
    assert (stats.produced, stats.acknowledged, stats.held, stats.dead_lettered) == (30, 30, 0, 0)
    producer.close()
    consumer.close()


def test_a_held_slot_is_never_reused_and_a_redelivery_reads_it(redis_server, shm_dir):
    producer = SubgraphPool(redis_server.url, "held", transport="shared_memory", capacity=16)
    consumer = SubgraphPool(redis_server.url, "held", visibility_timeout=0.3)
    originals = [sg(i, "held") for i in range(6)]
    producer.put(originals[0])
    first = consumer.get("dies", timeout=1)  # never acknowledged: its trainer "died"
    for original in originals[1:]:
        producer.put(original)
        entry = consumer.get("lives", timeout=1)
        consumer.ack(entry.entry_id)
    assert len(slots(shm_dir, "held")) >= 2  # the first slot stayed taken
    time.sleep(0.4)
    again = consumer.get("lives", timeout=1)
    assert again.entry_id == first.entry_id and again.deliveries == 2
    assert again.subgraph.equals(originals[0])
    assert consumer.ack(again.entry_id) is True
    producer.close()
    consumer.close()


def test_a_full_pool_makes_the_producer_wait_and_slots_stay_bounded(redis_server, shm_dir):
    producer = SubgraphPool(redis_server.url, "full", transport="shared_memory", capacity=3)
    for i in range(3):
        producer.put(sg(i, "full"))
    with pytest.raises(SaintpipeTimeout, match="stayed full"):
        producer.put(sg(3, "full"), timeout=0.2)
    assert len(slots(shm_dir, "full")) == 4  # three held, and the refused put's, handed back
    consumer = SubgraphPool(redis_server.url, "full")
    consumer.ack(consumer.get("t", timeout=1).entry_id)
    for i in range(3, 6):
        producer.put(sg(i, "full"), timeout=1)
        consumer.ack(consumer.get("t", timeout=1).entry_id)
    assert len(slots(shm_dir, "full")) == 4  # freed slots reused: no fifth
    assert [consumer.get("t", timeout=1).subgraph.sequence for _ in range(2)] == [4, 5]
    producer.close()
    consumer.close()


def test_put_encoded_and_mixed_transports_in_one_job(redis_server, shm_dir):
    in_shm = SubgraphPool(redis_server.url, "mixed", transport="shared_memory")
    in_redis = SubgraphPool(redis_server.url, "mixed", transport="redis")
    in_shm.put_encoded(encode_subgraph(sg(0, "mixed")))
    in_redis.put(sg(1, "mixed"))
    in_shm.put(sg(2, "mixed"))
    got = [in_redis.get("t", timeout=1).subgraph for _ in range(3)]
    assert [g.sequence for g in got] == [0, 1, 2]
    assert all(g.equals(sg(g.sequence, "mixed")) for g in got)
    in_shm.close()
    in_redis.close()


def test_delete_job_sweeps_only_that_jobs_slots_on_that_server(redis_server, shm_dir):
    from saintpipe.services.pool.redis_server import RedisServer

    doomed = SubgraphPool(redis_server.url, "job", transport="shared_memory")
    kept = SubgraphPool(redis_server.url, "job-2", transport="shared_memory")  # a job id that extends "job"
    doomed.put(sg(0, "job"))
    doomed.put(sg(1, "job"))
    kept.put(sg(0, "job-2"))
    with RedisServer(use_env=False) as other:  # the same job id on another Redis server
        elsewhere = SubgraphPool(other.url, "job", transport="shared_memory")
        elsewhere.put(sg(0, "job"))
        before = set(slots(shm_dir))
        assert len(before) == 4
        doomed.delete_job()
        after = set(slots(shm_dir))
        assert len(before - after) == 2 and all(shared_memory.server_tag(redis_server.url) in n
                                                 for n in before - after)
        assert SubgraphPool(other.url, "job").get("t", timeout=1).subgraph.equals(sg(0, "job"))
        elsewhere.close()
    assert SubgraphPool(redis_server.url, "job-2").get("t", timeout=1).subgraph.equals(sg(0, "job-2"))
    doomed.put(sg(2, "job"))  # the job starts afresh, with new slots
    assert SubgraphPool(redis_server.url, "job").get("t", timeout=1).subgraph.equals(sg(2, "job"))
    doomed.close()
    kept.close()


def test_a_consumer_that_cannot_see_the_slot_says_so_and_leaves_the_entry(redis_server, shm_dir, tmp_path,
                                                                           monkeypatch):
    producer = SubgraphPool(redis_server.url, "far", transport="shared_memory")
    producer.put(sg(0, "far"))
    elsewhere = tmp_path / "other-host-shm"
    elsewhere.mkdir()
    monkeypatch.setattr(shared_memory, "SHM_DIR", elsewhere)  # another /dev/shm, another identity
    consumer = SubgraphPool(redis_server.url, "far", visibility_timeout=0.3)
    with pytest.raises(ConfigError, match="another host or container.*pool.transport"):
        consumer.get("far-away", timeout=1)
    stats = consumer.stats()
    assert (stats.held, stats.dead_lettered) == (1, 0)  # nothing lost
    monkeypatch.setattr(shared_memory, "SHM_DIR", shm_dir)  # a consumer on the producer's host
    time.sleep(0.4)
    entry = consumer.get("near", timeout=1)
    assert entry.subgraph.equals(sg(0, "far")) and entry.deliveries == 2
    producer.close()
    consumer.close()


@pytest.mark.parametrize("damage", ["remove", "corrupt", "truncate"])
def test_a_lost_or_damaged_slot_sends_its_entry_to_the_dead_letters(redis_server, shm_dir, damage):
    producer = SubgraphPool(redis_server.url, "bad", transport="shared_memory")
    producer.put(sg(0, "bad", nodes=200, edges=900))
    (path,) = [shm_dir / n for n in slots(shm_dir, "bad")]
    if damage == "remove":
        path.unlink()
    elif damage == "corrupt":
        with open(path, "r+b") as f:
            f.seek(3000)
            byte = f.read(1)
            f.seek(3000)
            f.write(bytes([byte[0] ^ 0xFF]))
    else:
        with open(path, "r+b") as f:
            f.truncate(100)
    consumer = SubgraphPool(redis_server.url, "bad")
    expected = {"remove": "slot .* is gone", "corrupt": "checksum", "truncate": "slot .* is gone"}[damage]
    assert consumer.get("t", timeout=0.2) is None  # skipped, not raised
    (letter,) = consumer.dead_letters()
    assert re.search(expected, letter.reason) and letter.consumer == "t"
    stats = consumer.stats()
    assert (stats.held, stats.dead_lettered, stats.produced) == (0, 1, 1)
    producer.put(sg(1, "bad"))  # the producer goes on (a new slot, or the one it finds free)
    assert consumer.get("t", timeout=1).subgraph.equals(sg(1, "bad"))
    producer.close()
    consumer.close()


def test_a_reference_naming_a_file_outside_the_slots_is_refused(redis_server, shm_dir):
    client = redis_server.client()
    consumer = SubgraphPool(redis_server.url, "forged")
    consumer.get("t", timeout=0)  # creates the stream and its group
    namespace = shared_memory.namespace_id(shm_dir)
    key = "saintpipe:pool:{forged}:sg:forged"
    client.set(key, shared_memory.MAGIC + f"{namespace} ../../etc/passwd 10".encode())
    client.xadd("saintpipe:pool:{forged}:stream", {"k": key})
    assert consumer.get("t", timeout=0.2) is None
    assert "not a pool slot" in consumer.dead_letters()[0].reason
    assert consumer.stats().dead_lettered == 1
    consumer.close()


def test_slots_survive_a_redis_restart_and_are_reused_after_it(volatile_redis, shm_dir):
    producer = SubgraphPool(volatile_redis.url, "restart", transport="shared_memory", capacity=4)
    for i in range(3):
        producer.put(sg(i, "restart"))  # held: their slots are taken
    assert len(slots(shm_dir, "restart")) == 3
    volatile_redis.restart()  # no persistence: the entries are gone, so are the slots' claims
    consumer = SubgraphPool(volatile_redis.url, "restart")
    for i in range(3, 8):
        producer.put(sg(i, "restart"))
        entry = consumer.get("t", timeout=2)
        assert entry.subgraph.equals(sg(i, "restart"))
        consumer.ack(entry.entry_id)
    assert len(slots(shm_dir, "restart")) <= 4
    producer.close()
    consumer.close()


def test_the_default_shared_memory_directory_works(redis_server):
    if not shared_memory.available():
        pytest.skip("no writable /dev/shm on this machine")
    pool = SubgraphPool(redis_server.url, "devshm", transport="auto")
    assert pool.transport == "shared_memory"  # a loopback URL
    pool.put(sg(0, "devshm"))
    assert pool.get("t", timeout=1).subgraph.equals(sg(0, "devshm"))
    assert slots(shared_memory.SHM_DIR, "devshm")
    pool.delete_job()
    assert not slots(shared_memory.SHM_DIR, "devshm")
    pool.close()


def test_a_full_shm_directory_sends_the_bytes_through_redis_instead(redis_server, shm_dir, monkeypatch, caplog):
    def no_space(fd, offset, length):
        raise OSError(28, "No space left on device")

    producer = SubgraphPool(redis_server.url, "nospace", transport="shared_memory")
    consumer = SubgraphPool(redis_server.url, "nospace")
    client = redis_server.client()
    producer.put(sg(0, "nospace"))  # a slot
    with monkeypatch.context() as patch:
        patch.setattr(shared_memory.os, "posix_fallocate", no_space)  # /dev/shm is full
        with caplog.at_level("WARNING", logger="saintpipe.services.pool.pool"):
            producer.put(sg(1, "nospace", nodes=300, edges=2000))  # slot 0 is held; a new one finds no room
            producer.put(sg(2, "nospace", nodes=300, edges=2000))
        assert sum("cannot write a shared-memory slot" in r.message for r in caplog.records) == 1  # once
    assert all((shm_dir / n).stat().st_size in (0, 4096, 8192) for n in slots(shm_dir, "nospace"))  # no growth
    sizes = sorted(bytes_keys(client, "nospace").values())
    assert sizes[0] < 200 and sizes[1] > 1000 and sizes[2] > 1000  # one reference, two subgraphs in Redis
    producer.put(sg(3, "nospace"))  # room again: back to slots
    assert sum(1 for v in bytes_keys(client, "nospace").values() if v < 200) == 2
    got = [consumer.get("t", timeout=1).subgraph for _ in range(4)]
    assert [g.sequence for g in got] == [0, 1, 2, 3]
    assert got[1].equals(sg(1, "nospace", nodes=300, edges=2000))
    producer.close()
    consumer.close()


def test_a_slot_this_consumer_may_not_read_is_a_configuration_error(redis_server, shm_dir, monkeypatch):
    producer = SubgraphPool(redis_server.url, "private", transport="shared_memory")
    producer.put(sg(0, "private"))
    real_open = shared_memory.os.open

    def refused(path, flags, *args):
        if str(path).startswith(str(shm_dir / shared_memory.PREFIX)) and not flags & shared_memory.os.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(shared_memory.os, "open", refused)  # as if another user had written the slot
    consumer = SubgraphPool(redis_server.url, "private")
    with pytest.raises(ConfigError, match="may not read.*one user.*'redis'"):
        consumer.get("t", timeout=1)
    assert (consumer.stats().held, consumer.stats().dead_lettered) == (1, 0)  # the entry stays for another consumer
    producer.close()
    consumer.close()
