"""``saintpipe bench sweep``: the arms' records read into the report's rows and summary (ratios, the seeds' noise,
ASHA's stops and the groups' accounts)."""

from __future__ import annotations

import math
from pathlib import Path

from saintpipe.bench.sweep import Setup, figures

SETUP = Setup(data=Path("demo"), lrs=[0.02, 0.01, 1e-5], epochs=3, concurrent=3, seeds=2)


def trial(name: str, lr: float, val: float | None, test: float | None, steps: int, stopped_by: str = "finished",
          gone: float = math.nan, kept: bool = False, acknowledged: int = 10) -> dict:
    return {"trial": name, "settings": {"model.lr": lr}, "best_val": val, "test_score": test, "steps": steps,
            "stopped_by": stopped_by, "group_gone_s": gone, "group_kept": kept,
            "pool": {"produced": 40, "acknowledged": acknowledged, "waiting": 28, "pending": 2, "dead_lettered": 0}}


def run(lr: float, val: float, test: float, steps: int = 30, cpu: float = 6.0, seed: int = 0) -> dict:
    return {"lr": lr, "seed": seed, "wall_s": 20.0, "steps": steps, "subgraphs": 40, "sampler_cpu_s": cpu, "producing_cpu_s": cpu / 2,
            "val_score": val, "test_score": test, "account_adds_up": True}


def sweep(trials: list[dict]) -> dict:
    return {"wall_s": 30.0, "summary": {"sampler_cpu_s": 4.5, "sampler_producing_cpu_s": 1.5, "groups_left": []},
            "trials": trials}


TRIALS = [trial("trial-000", 0.02, 0.9, 0.91, 30), trial("trial-001", 0.01, 0.8, 0.8, 30),
          trial("trial-002", 1e-5, 0.1, 0.12, 10, "ASHA", gone=0.25)]
RUNS = [run(0.02, 0.9, 0.9), run(0.01, 0.8, 0.8), run(1e-5, 0.1, 0.1)]


def test_the_rows_sum_each_arm_and_the_summary_holds_the_ratios_beside_their_targets():
    rows, s = figures(SETUP, sweep(TRIALS), RUNS, best=0, noise=[run(0.02, 0.89, 0.88, seed=1)])
    swept, separate = rows
    assert (swept["steps"], separate["steps"]) == (70, 90)
    assert (swept["subgraphs"], separate["subgraphs"]) == (40, 120)  # the stream drawn once, and three times
    assert swept["cpu_ms_per_step"] == 1e3 * 4.5 / 70 and separate["cpu_ms_per_step"] == 1e3 * 18.0 / 90
    assert (swept["best_lr"], swept["best_test"], separate["best_lr"], separate["best_test"]) == (0.02, 0.91, 0.02, 0.9)
    assert math.isclose(s["sampler_cpu_per_step_ratio"], (4.5 / 70) / (18.0 / 90))
    assert s["sampler_cpu_per_step_target"] == "<= 0.35: met"  # 0.32
    assert s["sampler_cpu_total_ratio"] == 4.5 / 18.0
    assert s["wall_ratio"] == 0.5 and s["wall_target"] == "<= 0.7: met"
    assert math.isclose(s["best_test_difference"], 0.01) and math.isclose(s["seed_noise"], 0.02)
    assert s["within_noise"] is True
    assert s["asha_stopped"] == "trial-002 (lr 1e-05, test 0.1200)" and s["asha_group_gone_s"] == 0.25
    assert s["asha_groups_kept_as_last"] == "none" and s["accounts_add_up"] is True


def test_a_difference_beyond_the_seeds_spread_is_outside_the_noise():
    _, s = figures(SETUP, sweep(TRIALS), RUNS, best=0, noise=[run(0.02, 0.9, 0.9, seed=1)])
    assert s["seed_noise"] == 0.0 and s["within_noise"] is False


def test_a_stopped_trial_whose_group_was_the_last_has_no_time_and_is_named():
    trials = [*TRIALS[:2], trial("trial-002", 1e-5, 0.1, 0.12, 10, "ASHA", kept=True)]
    _, s = figures(SETUP, sweep(trials), RUNS, best=0, noise=[run(0.02, 0.89, 0.88, seed=1)])
    assert math.isnan(s["asha_group_gone_s"]) and s["asha_group_gone_target"] == "<= 5: n/a"
    assert s["asha_groups_kept_as_last"] == "trial-002"


def test_an_account_that_does_not_add_up_is_counted_and_fails_the_whole():
    trials = [*TRIALS[:2], trial("trial-002", 1e-5, 0.1, 0.12, 10, "ASHA", gone=0.25, acknowledged=9)]
    rows, s = figures(SETUP, sweep(trials), RUNS, best=0, noise=[run(0.02, 0.89, 0.88, seed=1)])
    assert rows[0]["accounts_add_up"] == "2/3 groups" and s["accounts_add_up"] is False
