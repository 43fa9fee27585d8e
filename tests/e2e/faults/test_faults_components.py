"""Faults in one component mid-run: the run goes on (a restart where needed) and ends as an undisturbed one.

Each test kills or pauses one process of a running ``saintpipe run`` by hand
and checks: exit 0, all epochs, a test score within 2 points of the
undisturbed run with the same seed, every subgraph accounted for, nothing
left behind. docs/how-to/faults.md lists what happens in each case.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from tests.support.faults import assert_accounted, assert_completed_like, restarts, wait_until

pytestmark = pytest.mark.faults


def finish_cleanly(run, undisturbed: float) -> dict:
    code = run.finish()
    assert code == 0, run.output()
    summary = run.summary()
    assert_completed_like(summary, undisturbed, run)
    account = assert_accounted(summary)
    assert run.left_behind() == []
    assert "Traceback" not in run.stderr, run.output()
    return {**summary, "account": account}


def test_a_killed_sampler_worker_is_restarted_by_ray(fault_run, undisturbed):
    run = fault_run().training()
    run.kill("ray::_SamplerWorkerActor")
    summary = finish_cleanly(run, undisturbed)
    assert summary["account"]["dead_lettered"] == 0


def test_a_killed_trainer_is_restarted_from_its_checkpoint(fault_run, undisturbed):
    run = fault_run().training(steps=60)  # past a checkpoint (every 25 steps)
    run.kill("ray::TrainerActor")
    wait_until(lambda: "trainers restarted" in run.stderr, 180, "the trainers' restart", run)
    summary = finish_cleanly(run, undisturbed)
    assert len(restarts(summary, "trainers")) == 1, summary["restarts"]
    resumed = re.search(r"trainers resumed from step (\d+) of its latest checkpoint", run.stderr)
    assert resumed and int(resumed.group(1)) >= 50, run.output()  # killed past step 60, checkpoints every 25
    # What it held unacknowledged came back to its successor at once (SubgraphPool.recover).
    assert summary["account"]["redelivered"] >= 1 and summary["account"]["dead_lettered"] == 0


@pytest.mark.parametrize("replicas", [1, 2], ids=["no-replicas", "two-replicas"])
def test_a_feature_shard_killed_while_serving_is_restarted_and_clients_retry(fault_run, undisturbed, replicas):
    run = fault_run(f"shard_replicas = {replicas}").training()
    # Kill it while the trainer gathers from it (every step does), a second time once it is back.
    run.kill("--shard 1")
    wait_until(lambda: "feature shard 1" in run.stderr and "restarted" in run.stderr, 120, "the shard's restart",
               run)
    summary = finish_cleanly(run, undisturbed)
    assert len(restarts(summary, "feature shard 1")) == 1, summary["restarts"]
    assert summary["account"]["dead_lettered"] == 0


def test_redis_paused_for_12_seconds_loses_nothing(fault_run, undisturbed):
    run = fault_run().training()
    redis = run.child("redis-server")
    redis.send_signal(signal.SIGSTOP)
    try:
        time.sleep(12)
    finally:
        redis.send_signal(signal.SIGCONT)
    summary = finish_cleanly(run, undisturbed)
    assert summary["restarts"] == [], summary["restarts"]  # a pause is waited out, not restarted
    assert summary["account"]["dead_lettered"] == 0, summary["account"]


def test_redis_killed_is_restarted_from_its_append_only_file(fault_run, undisturbed):
    run = fault_run().training()
    run.kill("redis-server")
    wait_until(lambda: "redis-server restarted" in run.stderr, 120, "the Redis restart", run)
    summary = finish_cleanly(run, undisturbed)
    assert len(restarts(summary, "redis-server")) == 1, summary["restarts"]
    assert summary["account"]["dead_lettered"] == 0, summary["account"]
