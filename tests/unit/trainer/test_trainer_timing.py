"""The one time breakdown: a trainer's, a data-parallel group's, and what ``saintpipe run`` reports."""

from __future__ import annotations

from dataclasses import fields

from saintpipe.trainer.result import TrainResult
from saintpipe.trainer.timing import TimeBreakdown


def test_a_group_sums_its_trainers_and_runs_as_long_as_the_longest():
    a = TimeBreakdown(sampling_wait=1.0, feature_fetch=2.0, compute=3.0, data_wait=0.5, evaluation=1.5, wall=10.0)
    b = TimeBreakdown(sampling_wait=2.0, feature_fetch=1.0, compute=4.0, data_wait=0.25, evaluation=0.0, wall=12.0)
    merged = TimeBreakdown.merged([a, b])
    assert merged == TimeBreakdown(
        sampling_wait=3.0, feature_fetch=3.0, compute=7.0, data_wait=0.75, evaluation=1.5, wall=12.0
    )
    assert TimeBreakdown.merged([]) == TimeBreakdown()


def test_trainer_fields_are_fields():
    names = {f.name for f in fields(TimeBreakdown)}
    assert set(TimeBreakdown.TRAINER_FIELDS) <= names
    assert {"sampling", "sampler_pool_wait", "startup"} == names - set(TimeBreakdown.TRAINER_FIELDS)


def test_the_trainer_summary_keeps_its_keys():
    times = TimeBreakdown(sampling_wait=1.0, feature_fetch=2.0, data_wait=3.0, compute=4.0, evaluation=5.0, wall=6.0)
    summary = TrainResult(0.9, 0.8, 2, 10, 10, False, -1, times).summary()
    keys = [k for k in summary if k.endswith("_s")]
    assert keys == ["sampling_wait_s", "feature_fetch_s", "data_wait_s", "compute_s", "evaluation_s", "total_s"]
    assert summary["total_s"] == 6.0 and summary["compute_s"] == 4.0
