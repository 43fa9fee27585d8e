"""The sweep's group keeper on a real pool, as Tune's callbacks drive it when a trial's trainer dies: a restart
releases the trial's group at once (the others must not wait at capacity for a trainer that is starting) and
registers it again when the trial starts, its account carried over; a job's only group is kept, with what it
held for the restarted consumer; the failure past the budget removes the group at once, registers the next
trial's and writes a ``failed`` row with the reason and the restarts."""

from __future__ import annotations

import io
import threading

import pytest

from saintpipe.core.errors import SaintpipeTimeout

from saintpipe.pipeline.restarts import RestartBudget
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.sweep.config import Trial
from saintpipe.sweep.driver import _GroupKeeper
from saintpipe.sweep.results import Results
from saintpipe.trainer.config import TrainerConfig
from tests.support.pool import numbered_subgraphs

sg = numbered_subgraphs(12, 30, job="keeper")
CONSUMER = "keeper-trainer-0"  # a trial's trainer comes back under the same name


def test_a_restart_releases_the_group_and_the_failure_past_the_budget_removes_it(redis_server, tmp_path):
    trials = [Trial(f"trial-00{i}", {"model.lr": 0.01 * (i + 1)}, TrainerConfig()) for i in range(3)]
    producer = SubgraphPool(redis_server.url, "keeper", capacity=4)
    for t in trials[:2]:  # the trials that run at once, before anything is put
        producer.add_group(t.trial_id)
    for i in range(4):
        producer.put(sg(i), timeout=0)
    out = io.StringIO()
    keeper = _GroupKeeper(producer, Results(tmp_path), trials, 2, threading.Event(), out,
                          RestartBudget(max_restarts=1, window_s=600), checkpoints=True, sweep_dir=tmp_path)
    first = SubgraphPool(redis_server.url, "keeper", group="trial-000")
    held = [first.get(CONSUMER, timeout=0) for _ in range(2)]  # then its trainer dies, holding two
    assert all(e is not None for e in held)
    other = SubgraphPool(redis_server.url, "keeper", group="trial-001")
    for _ in range(4):  # the other trial reads everything: the pool is held at capacity by trial-000 alone
        e = other.get("other-trainer", timeout=0)
        assert e is not None
        other.ack(e.entry_id)
    with pytest.raises(SaintpipeTimeout):
        producer.put(sg(4), timeout=0)

    keeper.restarted("trial-000", "trainer killed")
    assert "trial-000: trainer killed: restarting it from its latest checkpoint (1 of 1 restart(s) per 600 s)" \
        in out.getvalue()
    assert producer.groups() == ["trial-001"]  # released: the producer and trial-001 go on at once
    assert keeper.restarts_left("trial-000") == 0 and keeper.restarts_left("trial-001") == 1
    assert producer.put(sg(5), timeout=0)
    keeper.started("trial-000")  # Tune starts the retried trial: it reads the stream from here
    assert producer.groups() == ["trial-000", "trial-001"]
    again = SubgraphPool(redis_server.url, "keeper", group="trial-000")  # the restarted trainer's
    assert again.recover(CONSUMER) == 0
    assert again.get(CONSUMER, timeout=0) is None  # nothing from before it joined again
    producer.put(sg(6), timeout=0)
    retaken = again.get(CONSUMER, timeout=0)
    assert retaken is not None
    again.ack(retaken.entry_id)

    error = keeper.failure("trial-000", "trainer killed", "/ray/error.txt")
    assert error == "trainer killed 2 times, restart budget 1 per 600 s (Ray Tune's error file: /ray/error.txt)"
    keeper.ended("trial-000", tmp_path / "trials" / "trial-000", error=error)
    assert producer.groups() == ["trial-001", "trial-002"]  # the next trial's group first, then its own gone
    row = Results.read(tmp_path).rows["trial-000"]
    assert (row.stopped_by, row.restarts, row.error) == ("failed", 1, error)
    p = row.pool  # 4 before the restart (2 delivered and lost with the trainer, 2 waiting), 1 after it
    assert (p["produced"], p["acknowledged"], p["pending"], p["waiting"]) == (5, 1, 2, 2)
    assert p["produced"] == p["acknowledged"] + p["waiting"] + p["pending"] + p["dead_lettered"]
    assert f"trial-000: failed: {error}" in out.getvalue()
    for pool in (first, again, other, producer):
        pool.close()


def test_a_jobs_only_group_is_kept_with_what_it_held(redis_server, tmp_path):
    trials = [Trial("trial-000", {}, TrainerConfig())]
    producer = SubgraphPool(redis_server.url, "only")
    producer.add_group("trial-000")
    for i in range(3):
        producer.put(sg(i), timeout=0)
    keeper = _GroupKeeper(producer, Results(tmp_path), trials, 1, threading.Event(), io.StringIO(),
                          RestartBudget(max_restarts=1, window_s=600), checkpoints=True, sweep_dir=tmp_path)
    first = SubgraphPool(redis_server.url, "only", group="trial-000")
    held = first.get(CONSUMER, timeout=0)
    assert held is not None
    keeper.restarted("trial-000", "trainer killed")
    keeper.started("trial-000")
    assert producer.groups() == ["trial-000"]
    again = SubgraphPool(redis_server.url, "only", group="trial-000")
    assert again.recover(CONSUMER) == 1
    retaken = again.get(CONSUMER, timeout=0)
    assert retaken is not None and retaken.entry_id == held.entry_id
    for pool in (first, again, producer):
        pool.close()
