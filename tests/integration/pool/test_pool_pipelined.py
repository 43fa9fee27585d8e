"""Pipelined puts on a real Redis: put_nowait/settle/abandon, and prepare/cancel with a message written in place."""

from __future__ import annotations

import pytest

from saintpipe.core.errors import InvalidArgument, SaintpipeTimeout
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.codec import MessageFramer, encode_subgraph, seal_subgraph
from saintpipe.services.pool.pool import SubgraphPool
from tests.support.pool import numbered_subgraphs

sg = numbered_subgraphs(30, 120)


def slots(directory, job: str) -> int:
    return len(list(directory.glob(f"{shared_memory.PREFIX}*{job}+*")))


def uploads(client, job: str) -> list[bytes]:
    return list(client.scan_iter(match=f"saintpipe:pool:{{{job}}}:sg:*"))


@pytest.mark.parametrize("transport", ["shared_memory", "redis"])
def test_put_nowait_then_settle_delivers_every_subgraph_in_order(redis_server, shm_dir, transport):
    job = f"pipe-{transport}"
    producer = SubgraphPool(redis_server.url, job, transport=transport, capacity=64)
    consumer = SubgraphPool(redis_server.url, job)
    originals = [sg(i, job) for i in range(12)]
    ids = []
    for original in originals:
        ids.append(producer.settle())  # the previous put, answered while this subgraph was "drawn"
        producer.put_nowait(original)
        assert producer.unsettled
    ids.append(producer.settle())
    assert ids[0] is None and all(ids[1:]) and len(set(ids[1:])) == 12 and not producer.unsettled
    for original in originals:
        entry = consumer.get("t", timeout=1)
        assert entry.subgraph.equals(original)
        consumer.ack(entry.entry_id)
    assert producer.stats().produced == 12
    producer.close()
    consumer.close()


def test_a_second_put_before_settling_is_refused(redis_server, shm_dir):
    producer = SubgraphPool(redis_server.url, "twice", transport="shared_memory")
    producer.put_nowait(sg(0, "twice"))
    with pytest.raises(InvalidArgument, match="settle"):
        producer.put_nowait(sg(1, "twice"))
    with pytest.raises(InvalidArgument, match="settle"):
        producer.put(sg(1, "twice"))
    assert producer.settle() is not None
    producer.put(sg(1, "twice"))
    assert producer.stats().produced == 2
    producer.close()


def test_settle_on_a_full_pool_times_out_keeps_the_put_and_completes_once_there_is_room(redis_server, shm_dir):
    producer = SubgraphPool(redis_server.url, "room", transport="shared_memory", capacity=2)
    consumer = SubgraphPool(redis_server.url, "room")
    producer.put(sg(0, "room"))
    producer.put(sg(1, "room"))
    producer.put_nowait(sg(2, "room"))
    with pytest.raises(SaintpipeTimeout, match="stayed full"):
        producer.settle(timeout=0.1)
    assert producer.unsettled  # still ours to finish: nothing dropped
    with pytest.raises(SaintpipeTimeout):
        producer.settle(timeout=0)
    consumer.ack(consumer.get("t", timeout=1).entry_id)
    assert producer.settle(timeout=1) is not None
    assert [consumer.get("t", timeout=1).subgraph.sequence for _ in range(2)] == [1, 2]
    assert producer.stats().produced == 3
    producer.close()
    consumer.close()


def test_abandon_gives_up_a_refused_put_and_frees_its_slot_and_upload(redis_server, shm_dir):
    producer = SubgraphPool(redis_server.url, "gone", transport="shared_memory", capacity=1)
    producer.put(sg(0, "gone"))
    producer.put_nowait(sg(1, "gone"))
    assert producer.abandon() is None and not producer.unsettled
    client = redis_server.client()
    assert len(uploads(client, "gone")) == 1  # only the entry's own
    consumer = SubgraphPool(redis_server.url, "gone")
    consumer.ack(consumer.get("t", timeout=1).entry_id)
    producer.put(sg(2, "gone"), timeout=1)  # the abandoned put's slot is reused: no third file
    assert slots(shm_dir, "gone") == 2
    assert consumer.get("t", timeout=1).subgraph.sequence == 2
    producer.close()
    consumer.close()


def test_abandon_keeps_a_put_that_redis_took(redis_server, shm_dir):
    producer = SubgraphPool(redis_server.url, "took", transport="shared_memory")
    producer.put_nowait(sg(0, "took"))
    entry_id = producer.abandon()  # Redis had added it: it stays, and so does its slot
    assert entry_id is not None
    consumer = SubgraphPool(redis_server.url, "took")
    entry = consumer.get("t", timeout=1)
    assert entry.entry_id == entry_id and entry.subgraph.equals(sg(0, "took"))
    producer.close()
    consumer.close()


def framed_writer(subgraph, framer: MessageFramer):
    """write_into for prepare(): lay the message out in the slot, write the arrays in place, seal."""

    def write_into(allocate):
        framed = framer.frame(allocate, subgraph.num_nodes, subgraph.num_edges, sequence=subgraph.sequence,
                              seed=subgraph.seed)
        for view, name in zip(framed.arrays, ("node_ids", "indptr", "indices", "edge_weights", "edge_weights_t",
                                              "loss_weights")):
            view[:] = getattr(subgraph, name)
        return seal_subgraph(framed)

    return write_into


def test_prepare_writes_the_message_in_a_slot_while_the_previous_put_is_unsettled(redis_server, shm_dir):
    job = "prepared"
    producer = SubgraphPool(redis_server.url, job, transport="shared_memory", capacity=64)
    consumer = SubgraphPool(redis_server.url, job)
    framer = MessageFramer(job, 0)
    originals = [sg(i, job, nodes=20 + i, edges=80 + 4 * i) for i in range(20)]
    for original in originals:
        ready = producer.prepare(framed_writer(original, framer), or_else=lambda: pytest.fail("no fallback"))
        producer.settle()
        producer.put_nowait(ready)
        entry = consumer.get("t", timeout=1)  # one behind at most
        if entry is not None:
            consumer.ack(entry.entry_id)
    producer.settle()
    client = redis_server.client()
    assert max(client.strlen(k) for k in uploads(client, job)) < 200  # references, not subgraphs
    while (entry := consumer.get("t", timeout=0.2)) is not None:
        consumer.ack(entry.entry_id)
    # A pipelined producer keeps a few slots in turn, found free by the checks riding on its puts.
    assert 2 <= slots(shm_dir, job) <= 8
    assert producer.stats().produced == 20 and producer.stats().dead_lettered == 0
    producer.close()
    consumer.close()


def test_a_message_written_in_place_is_byte_for_byte_the_encoded_subgraph(redis_server, shm_dir):
    job = "bytes"
    producer = SubgraphPool(redis_server.url, job, transport="shared_memory")
    original = sg(3, job)
    producer.put_nowait(producer.prepare(framed_writer(original, MessageFramer(job, 0)), or_else=lambda: None))
    producer.settle()
    client = redis_server.client()
    (key,) = uploads(client, job)
    assert bytes(shared_memory.read(client.get(key), shm_dir)) == encode_subgraph(original)
    producer.close()


def test_cancel_frees_the_slot_of_a_prepared_put(redis_server, shm_dir):
    job = "cancel"
    producer = SubgraphPool(redis_server.url, job, transport="shared_memory")
    framer = MessageFramer(job, 0)
    for i in range(5):
        producer.cancel(producer.prepare(framed_writer(sg(i, job), framer), or_else=lambda: None))
    assert slots(shm_dir, job) == 1  # each cancel handed the one slot back
    assert producer.stats().produced == 0
    sent = producer.prepare(framed_writer(sg(9, job), framer), or_else=lambda: None)
    producer.put_nowait(sent)
    with pytest.raises(InvalidArgument, match="was sent"):
        producer.cancel(sent)
    assert producer.settle() is not None
    producer.close()


def test_prepare_falls_back_to_the_subgraph_when_no_slot_can_be_written(redis_server, shm_dir, monkeypatch):
    job = "fallback"
    producer = SubgraphPool(redis_server.url, job, transport="shared_memory")

    def no_space(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shared_memory.os, "posix_fallocate", no_space)
    original = sg(1, job)
    producer.put_nowait(producer.prepare(framed_writer(original, MessageFramer(job, 0)), or_else=lambda: original))
    assert producer.settle() is not None
    client = redis_server.client()
    assert max(client.strlen(k) for k in uploads(client, job)) == len(encode_subgraph(original))  # the bytes
    consumer = SubgraphPool(redis_server.url, job)
    assert consumer.get("t", timeout=1).subgraph.equals(original)
    producer.close()
    consumer.close()


def test_redis_transport_prepare_encodes_the_subgraph(redis_server):
    job = "plain"
    producer = SubgraphPool(redis_server.url, job, transport="redis")
    original = sg(2, job)
    producer.put_nowait(producer.prepare(lambda allocate: pytest.fail("no slots here"), or_else=lambda: original))
    assert producer.settle() is not None
    consumer = SubgraphPool(redis_server.url, job)
    assert consumer.get("t", timeout=1).subgraph.equals(original)
    producer.close()
    consumer.close()
