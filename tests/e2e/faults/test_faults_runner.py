"""Faults of the run itself: signals to ``saintpipe run``, a component past its restart budget, two runs at once."""

from __future__ import annotations

import re
import signal
import time

import pytest

from tests.support.cli import run_cli
from tests.support.faults import (
    EPOCHS,
    assert_accounted,
    assert_completed_like,
    restarts,
    score,
    shm_files,
    wait_until,
)

pytestmark = pytest.mark.faults


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_run_with_its_summary_and_nothing_left(fault_run, sig, code):
    run = fault_run().training()
    run.signal(sig)
    assert run.finish(120) == code, run.output()
    summary = run.summary()
    assert summary["stopped_by"] == signal.Signals(sig).name
    assert_accounted(summary)
    assert f"{signal.Signals(sig).name} received: stopping every component" in run.stderr
    assert run.left_behind() == []


def test_ctrl_c_at_the_terminal_stops_every_component_in_order(fault_run):
    """SIGINT to the whole foreground group, as a terminal sends it: the run still stops every component in
    its own order (Redis and the shards run in process groups of their own, so the signal reaches them
    only through the run), reports, and leaves nothing behind."""
    run = fault_run().training()
    run.signal_group(signal.SIGINT)
    assert run.finish(120) == 130, run.output()
    summary = run.summary()
    assert summary["stopped_by"] == "SIGINT"
    assert_accounted(summary)
    assert "unreachable" not in run.stderr, run.output()
    assert "Traceback" not in run.stderr, run.output()
    assert run.left_behind() == []


def test_a_sigkilled_runner_takes_its_children_and_its_shared_memory_along(fault_run, tmp_path):
    run = fault_run().training()
    run.sample_tree(ports=True)
    ours = shm_files() - run.shm_before
    assert ours, "a running pipeline keeps subgraphs and feature rows in /dev/shm"
    run.proc.kill()
    run.proc.wait()
    killed = time.monotonic()
    # Its /dev/shm files go with it: the run's watchdog removes those of the processes it killed, and of
    # the runner itself, within seconds (saintpipe.core.reaper); no `saintpipe doctor --clean` needed.
    while (left := shm_files() - run.shm_before) and time.monotonic() < killed + 10:
        time.sleep(0.5)
    assert left == set(), f"/dev/shm files outlived a SIGKILLed runner by 10 s: {sorted(left)}"
    deadline = killed + 120  # children die with their parent; Ray's workers follow their raylet
    while (alive := run.alive()) and time.monotonic() < deadline:
        time.sleep(1)
    assert alive == [], "processes outlived a SIGKILLed runner:\n" + "\n".join(alive)
    assert run.open_ports() == []
    cleaned = run_cli("doctor", "--clean")  # nothing left for it to do
    assert cleaned.returncode == 0, cleaned.stderr
    assert shm_files() - run.shm_before == set(), cleaned.stdout


def test_a_component_past_its_budget_ends_the_run_with_one_line_and_resume_goes_on(fault_run, undisturbed, tmp_path):
    run = fault_run("max_restarts = 1").training(steps=60)
    run.kill("ray::TrainerActor")
    wait_until(lambda: "trainers restarted" in run.stderr, 180, "the trainers' restart", run)
    run.wait_for_steps(30, 120)  # back in business (resumed from its checkpoint at step 50 or later)
    run.kill("ray::TrainerActor")
    code = run.finish()
    assert code == 2, run.output()
    summary = run.summary()  # what ran is still reported
    assert summary["failure"] and len(restarts(summary, "trainers")) == 1
    errors = [line for line in run.stderr.splitlines() if line.startswith("saintpipe: error:")]
    assert len(errors) == 1, run.stderr
    assert "max_restarts" in errors[0] and "resume with: saintpipe run --resume" in errors[0], errors[0]
    assert "Traceback" not in run.stderr, run.output()
    assert run.left_behind() == []
    checkpoint = re.search(r"--resume (\S+)", errors[0]).group(1)

    resumed = fault_run("", "--resume", checkpoint)
    assert resumed.finish() == 0, resumed.output()
    again = resumed.summary()
    assert_completed_like(again, undisturbed, resumed)
    assert re.search(r"^trainers resumed from step [1-9]\d* .* of the checkpoint in ", resumed.stdout, re.M), \
        resumed.output()
    assert again["run_dir"] == checkpoint and again["checkpoint_dir"] == f"{checkpoint}/checkpoints"  # the run's own
    assert len(again["step_losses"]) == again["steps"]  # the checkpoint carried the steps before the resume


def test_two_runs_at_once_both_finish(undisturbed_pair):
    """The pair of runs the suite's reference score comes from (conftest.py) ran at once: both finished, each
    exited 0 with its pool accounted for and nothing left behind (the fixture asserts those as it waits)."""
    for summary in undisturbed_pair:
        assert summary["epochs"] == EPOCHS
        assert_accounted(summary)
    first, second = (score(summary) for summary in undisturbed_pair)
    assert abs(second - first) <= 0.02, (first, second)  # the same seed, whatever the order subgraphs came in
