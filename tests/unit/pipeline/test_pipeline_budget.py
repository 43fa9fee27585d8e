"""How [run] max_seconds is split: the deadlines of RunBudget."""

from __future__ import annotations

import math
import time

import pytest

from saintpipe.pipeline.budget import EVALUATION_SAFETY, RunBudget


def test_training_ends_early_enough_for_the_evaluation_and_the_stop():
    b = RunBudget(limit_s=300.0, started=1000.0)
    assert b.deadline == 1300.0 and b.stop_margin_s == 15.0  # 10 % capped at 15 s
    assert b.evaluation_cut == 1285.0
    assert b.training_end(40.0) == pytest.approx(1285.0 - EVALUATION_SAFETY * 40.0)
    assert b.training_end(math.nan) == b.evaluation_cut  # no estimate yet: nothing reserved
    assert b.training_end(-3.0) == b.evaluation_cut


def test_a_short_limit_still_keeps_time_to_stop():
    assert RunBudget(limit_s=20.0, started=0.0).stop_margin_s == 4.0
    assert RunBudget(limit_s=60.0, started=0.0).stop_margin_s == pytest.approx(6.0)


def test_to_wall_maps_monotonic_onto_the_wall_clock():
    now_m, now_w = time.monotonic(), time.time()
    assert RunBudget.to_wall(now_m + 30.0) == pytest.approx(now_w + 30.0, abs=0.5)


def test_the_description_names_every_share():
    b = RunBudget(limit_s=120.0, started=0.0)
    text = b.describe(startup_s=12.3, training_end=b.training_end(20.0), evaluation_s=20.0)
    assert text.startswith("120 s: start-up 12.3 s, training until 83.0 s") and "estimated 20 s" in text
    assert "cut at 108.0 s" in text and "12.0 s to stop" in text
    assert "no estimate" in b.describe(1.0, b.training_end(math.nan), math.nan)


def test_the_description_says_when_no_final_pass_is_needed():
    b = RunBudget(limit_s=100.0, started=0.0)
    text = b.describe(5.0, b.training_end(0.0), 30.0, needed=False)
    assert "training until 90.0 s, no final pass (the best validation scored the test split)" in text
