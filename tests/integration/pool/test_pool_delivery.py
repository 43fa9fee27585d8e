"""N producer and M consumer processes on a real Redis: exactly once without failures, at least once with one.

Workers are forked processes, each with its own SubgraphPool. Consumers log
every subgraph they trained on to their own file (one line, flushed, so the
log survives a SIGKILL) and check its contents against a regenerated copy.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections import Counter
from pathlib import Path

from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.synthetic import random_subgraph

FORK = multiprocessing.get_context("fork")


def subgraph_for(job: str, worker: int, seq: int):
    return random_subgraph(30, 120, seed=worker * 100_000 + seq, job_id=job, worker=worker, sequence=seq)


# Compile the codec's kernels here, once, so forked workers start warm (a compile
# in a worker could outlast the short visibility timeout of the kill test).
decode_subgraph(encode_subgraph(subgraph_for("warm-up", 0, 0)))


def produce(url: str, job: str, worker: int, count: int) -> None:
    with SubgraphPool(url, job, capacity=16) as pool:
        for seq in range(count):
            pool.put(subgraph_for(job, worker, seq), timeout=120)


def consume(
    url: str, job: str, name: str, log: str, visibility: float, hang_after: int | None = None
) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    trained = 0
    with SubgraphPool(url, job, capacity=16, visibility_timeout=visibility) as pool:
        while True:
            entry = pool.get(name, timeout=0.5)
            if entry is None:
                continue
            sg = entry.subgraph
            record = {
                "worker": sg.worker,
                "seq": sg.sequence,
                "deliveries": entry.deliveries,
                "intact": sg.equals(subgraph_for(job, sg.worker, sg.sequence)),
            }
            if hang_after is not None and trained >= hang_after and entry.deliveries == 1:
                os.write(fd, (json.dumps({**record, "event": "held"}) + "\n").encode())
                time.sleep(600)  # a trainer stuck mid-step: the test kills it here
            os.write(fd, (json.dumps({**record, "event": "trained"}) + "\n").encode())
            pool.ack(entry.entry_id)
            trained += 1


def read_logs(paths: list[Path]) -> list[dict]:
    return [json.loads(line) for p in paths if p.exists() for line in p.read_text().splitlines()]


def wait_for(predicate, seconds: float = 90.0, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def run_job(
    url: str,
    job: str,
    tmp_path: Path,
    producers: int,
    per_producer: int,
    consumers: int,
    visibility: float,
    hang_after: int | None = None,
):
    logs = [tmp_path / f"consumer-{i}.log" for i in range(consumers)]
    cons = [
        FORK.Process(
            target=consume,
            args=(url, job, f"trainer-{i}", str(logs[i]), visibility, hang_after if i == 0 else None),
            daemon=True,
        )
        for i in range(consumers)
    ]
    prods = [
        FORK.Process(target=produce, args=(url, job, w, per_producer), daemon=True) for w in range(producers)
    ]
    for p in cons + prods:
        p.start()
    return cons, prods, logs


def stop(processes) -> None:
    for p in processes:
        if p.is_alive():
            p.kill()
        p.join(10)


def test_every_entry_is_consumed_exactly_once(redis_server, tmp_path):
    job, producers, per_producer, consumers = "exactly-once", 3, 40, 3
    total = producers * per_producer
    cons, prods, logs = run_job(redis_server.url, job, tmp_path, producers, per_producer, consumers, 30.0)
    pool = SubgraphPool(redis_server.url, job)
    try:
        for p in prods:
            p.join(120)
            assert p.exitcode == 0, "a producer failed"
        wait_for(lambda: pool.stats().acknowledged >= total, what="all entries acknowledged")
    finally:
        stop(cons + prods)
    records = read_logs(logs)
    trained = Counter((r["worker"], r["seq"]) for r in records if r["event"] == "trained")
    assert set(trained) == {(w, s) for w in range(producers) for s in range(per_producer)}
    assert max(trained.values()) == 1, "an entry was trained on twice"
    assert all(r["intact"] and r["deliveries"] == 1 for r in records)
    assert len({r["worker"] for r in records}) == producers
    stats = pool.stats()
    assert (stats.produced, stats.acknowledged, stats.redelivered, stats.depth, stats.pending) == (
        total,
        total,
        0,
        0,
        0,
    )
    pool.close()


def test_entries_of_a_killed_consumer_are_redelivered(redis_server, tmp_path):
    job, producers, per_producer, consumers = "killed-consumer", 2, 20, 3
    total = producers * per_producer
    cons, prods, logs = run_job(
        redis_server.url, job, tmp_path, producers, per_producer, consumers, visibility=2.0, hang_after=2
    )
    pool = SubgraphPool(redis_server.url, job)
    try:
        wait_for(
            lambda: any(r["event"] == "held" for r in read_logs(logs[:1])), what="the victim to hold an entry"
        )
        os.kill(cons[0].pid, signal.SIGKILL)  # dies mid-step, never acknowledging
        cons[0].join(10)
        for p in prods:
            p.join(120)
            assert p.exitcode == 0, "a producer failed"
        wait_for(lambda: pool.stats().acknowledged >= total, what="all entries acknowledged")
    finally:
        stop(cons + prods)
    records = read_logs(logs)
    held = [r for r in records if r["event"] == "held"]
    assert len(held) == 1
    victim_entry = (held[0]["worker"], held[0]["seq"])
    trained = [r for r in records if r["event"] == "trained"]
    assert {(r["worker"], r["seq"]) for r in trained} == {
        (w, s) for w in range(producers) for s in range(per_producer)
    }
    again = [r for r in trained if (r["worker"], r["seq"]) == victim_entry]
    assert again and again[0]["deliveries"] >= 2, "the held entry was not redelivered"
    assert all(r["intact"] for r in records)
    stats = pool.stats()
    assert stats.redelivered >= 1
    assert stats.acknowledged == total and stats.held == 0
    pool.close()
