"""RestartBudget: so many restarts per sliding window, per component."""

from __future__ import annotations

import pytest

from saintpipe.pipeline.restarts import RestartBudget


def test_allows_max_restarts_within_the_window_then_refuses():
    budget = RestartBudget(max_restarts=2, window_s=10)
    assert budget.allow("shard", 0.0) and budget.allow("shard", 1.0)
    assert not budget.allow("shard", 2.0)
    assert budget.used("shard") == 2


def test_the_window_slides():
    budget = RestartBudget(max_restarts=2, window_s=10)
    assert budget.allow("shard", 0.0) and budget.allow("shard", 5.0)
    assert not budget.allow("shard", 9.9)
    assert budget.allow("shard", 10.0)  # the restart at 0 s left the window
    assert not budget.allow("shard", 14.0)


def test_left_says_what_the_window_still_allows_without_counting():
    budget = RestartBudget(max_restarts=2, window_s=10)
    assert budget.left("trial", 0.0) == 2 and budget.left("trial", 0.0) == 2  # asking counts nothing
    assert budget.allow("trial", 1.0)
    assert budget.left("trial", 5.0) == 1
    assert budget.allow("trial", 5.0) and budget.left("trial", 6.0) == 0
    assert budget.left("trial", 11.0) == 1  # the restart at 1 s left the window


def test_components_have_their_own_budgets():
    budget = RestartBudget(max_restarts=1, window_s=60)
    assert budget.allow("redis", 0.0) and budget.allow("trainers", 0.0)
    assert not budget.allow("redis", 1.0)


def test_zero_never_restarts():
    assert not RestartBudget(max_restarts=0).allow("trainers", 0.0)


@pytest.mark.parametrize("args", [(-1, 10.0), (1, 0.0)])
def test_rejects_nonsense(args):
    with pytest.raises(ValueError):
        RestartBudget(*args)
