"""The sweep's group keeper on a real pool, as Tune's callbacks drive it when a trial's trainer dies: a restart
keeps the trial's group and what it held (taken back by the restarted consumer), the failure past the budget
removes the group at once, registers the next trial's and writes a ``failed`` row with the reason and the
restarts."""

from __future__ import annotations

import io
import threading

from saintpipe.pipeline.restarts import RestartBudget
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.sweep.config import Trial
from saintpipe.sweep.driver import _GroupKeeper
from saintpipe.sweep.results import Results
from saintpipe.trainer.config import TrainerConfig
from tests.support.pool import numbered_subgraphs

sg = numbered_subgraphs(12, 30, job="keeper")
CONSUMER = "keeper-trainer-0"  # a trial's trainer comes back under the same name


def test_a_restart_keeps_the_group_and_the_failure_past_the_budget_removes_it(redis_server, tmp_path):
    trials = [Trial(f"trial-00{i}", {"model.lr": 0.01 * (i + 1)}, TrainerConfig()) for i in range(3)]
    producer = SubgraphPool(redis_server.url, "keeper")
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

    keeper.restarted("trial-000", "trainer killed")
    assert "trial-000: trainer killed: restarting it from its latest checkpoint (1 of 1 restart(s) per 600 s)" \
        in out.getvalue()
    assert producer.groups() == ["trial-000", "trial-001"]
    assert keeper.restarts_left("trial-000") == 0 and keeper.restarts_left("trial-001") == 1
    again = SubgraphPool(redis_server.url, "keeper", group="trial-000")  # the restarted trainer's
    assert again.recover(CONSUMER) == 2
    retaken = again.get(CONSUMER, timeout=0)
    assert retaken is not None and retaken.entry_id == held[0].entry_id
    again.ack(retaken.entry_id)

    error = keeper.failure("trial-000", "trainer killed", "/ray/error.txt")
    assert error == "trainer killed 2 times, restart budget 1 per 600 s (Ray Tune's error file: /ray/error.txt)"
    keeper.ended("trial-000", tmp_path / "trials" / "trial-000", error=error)
    assert producer.groups() == ["trial-001", "trial-002"]  # the next trial's group first, then its own gone
    row = Results.read(tmp_path).rows["trial-000"]
    assert (row.stopped_by, row.restarts, row.error) == ("failed", 1, error)
    p = row.pool
    assert (p["produced"], p["acknowledged"], p["pending"], p["waiting"]) == (4, 1, 1, 2)
    assert p["produced"] == p["acknowledged"] + p["waiting"] + p["pending"] + p["dead_lettered"]
    assert f"trial-000: failed: {error}" in out.getvalue()
    for pool in (first, again, producer):
        pool.close()
