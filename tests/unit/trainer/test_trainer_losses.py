"""The loss-spike ratio on hand-made loss sequences, and the growing per-step record."""

from __future__ import annotations

import math

import numpy as np
import pytest

from saintpipe.trainer.losses import StepLosses, loss_spike, loss_spike_ratio


def test_a_spike_after_the_first_epoch_is_its_height_over_the_median():
    losses = [9.0, 5.0, 3.0] + [1.0, 1.2, 30.0, 0.8, 1.0]  # epoch 0 falls from 9; one spike of 30 later
    epochs = [0, 0, 0] + [1, 1, 1, 2, 2]
    spike = loss_spike(losses, epochs)
    assert spike.steps == 5 and spike.largest == 30.0 and spike.median == 1.0
    assert loss_spike_ratio(losses, epochs) == 30.0


def test_a_steady_run_has_a_ratio_near_one_and_the_first_epoch_does_not_count():
    losses = [50.0, 20.0] + [1.1, 0.9, 1.0, 1.05]
    epochs = [0, 0, 1, 1, 1, 1]
    assert loss_spike_ratio(losses, epochs) == pytest.approx(1.1 / 1.025)
    # Counting the first epoch too would report its initial loss as a spike.
    assert loss_spike_ratio(losses, epochs, after_epoch=0) == pytest.approx(50.0 / 1.075)


def test_no_step_after_the_first_epoch_gives_nan():
    assert math.isnan(loss_spike_ratio([3.0, 2.0, 1.0], [0, 0, 0]))
    assert math.isnan(loss_spike_ratio([], []))
    assert loss_spike([], []).steps == 0


def test_one_step_after_the_first_epoch_is_its_own_median():
    assert loss_spike_ratio([3.0, 2.0], [0, 1]) == 1.0


def test_a_non_finite_loss_after_the_first_epoch_is_reported_as_an_infinite_spike():
    spike = loss_spike([1.0, 1.0, math.nan, 2.0, 1.0], [0, 1, 1, 1, 1])
    assert spike.ratio == math.inf and spike.non_finite == 1 and spike.median == 1.0
    assert loss_spike_ratio([1.0, math.inf], [1, 1]) == math.inf
    assert math.isnan(loss_spike([math.nan], [1]).median)  # nothing finite to take a median of
    # In the first epoch it is left out like every other first-epoch step.
    assert loss_spike_ratio([math.nan, 2.0, 1.0], [0, 1, 1]) == pytest.approx(2.0 / 1.5)


def test_a_zero_median_is_an_unbounded_spike_unless_every_loss_is_zero():
    assert loss_spike_ratio([0.0, 0.0, 0.5], [1, 1, 1]) == math.inf
    assert loss_spike_ratio([0.0, 0.0], [1, 1]) == 1.0


def test_lengths_must_agree():
    with pytest.raises(ValueError, match="3 step losses but 2 step epochs"):
        loss_spike([1.0, 2.0, 3.0], [0, 1])


def test_the_record_grows_past_its_capacity_and_keeps_the_order():
    record = StepLosses(capacity=2)
    for i in range(1000):
        record.append(float(i) / 7, i // 100)
    assert len(record) == 1000
    np.testing.assert_array_equal(record.losses, np.arange(1000) / 7)
    np.testing.assert_array_equal(record.epochs, np.arange(1000) // 100)


def test_the_record_round_trips_through_its_state():
    record = StepLosses()
    for i in range(5):
        record.append(1.0 + i, i // 2)
    copy = StepLosses()
    copy.load_state_dict(record.state_dict())
    copy.append(9.0, 2)
    assert copy.losses.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 9.0] and copy.epochs.tolist() == [0, 0, 1, 1, 2, 2]
    assert len(record) == 5  # the state was a copy
    with pytest.raises(ValueError, match="2 step losses but 1 step epochs"):
        copy.load_state_dict({"losses": [1.0, 2.0], "epochs": [0]})


def test_short_epochs_leave_out_the_first_five_percent_of_steps():
    """Epochs of 2 steps (Cora): the initial descent is not a spike, a late step 6x the median is."""
    descent = np.linspace(2.0, 0.2, 10)  # the first 10 of 200 steps fall from ln(7)-ish to the trained level
    losses = np.concatenate([descent, np.full(190, 0.2)])
    epochs = np.arange(200) // 2
    assert loss_spike_ratio(losses, epochs) == pytest.approx(1.0)
    assert loss_spike_ratio(losses, epochs, warmup_fraction=0.0) == pytest.approx(8.0)  # epoch rule: from step 2
    losses[150] = 1.2
    spike = loss_spike(losses, epochs)
    assert spike.ratio == pytest.approx(6.0) and spike.steps == 190


def test_long_epochs_keep_the_first_epoch_rule():
    """When the first epoch is longer than 5 % of the run, the epoch decides where counting starts."""
    losses = np.concatenate([np.full(30, 5.0), np.full(70, 1.0)])
    epochs = np.arange(100) // 30
    assert loss_spike(losses, epochs).steps == 70
