"""Every trainer metric carries a `trial` label: a sweep's trials (one job, so one trainer name) each have series
of their own; a plain run's is empty, which Prometheus reads as no label at all."""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest

from saintpipe.trainer import metrics as trainer_metrics
from saintpipe.trainer.assemble import TrainerSpec
from saintpipe.trainer.metrics import TrainerMetrics


def test_every_trainer_metric_is_labelled_by_trainer_and_trial():
    wrappers = [m for m in vars(trainer_metrics).values() if hasattr(m, "_labelnames")]
    assert len(wrappers) >= 9
    assert {m._name: m._labelnames for m in wrappers} == {m._name: ("trainer", "trial") for m in wrappers}


def test_two_trials_of_one_job_have_series_of_their_own():
    a, b = TrainerMetrics("labels-trainer-0", "trial-000"), TrainerMetrics("labels-trainer-0", "trial-001")
    a.observe_step(0.01, 0.2, 0.05, 1.5)
    a.observe_step(0.01, 0.2, 0.05, 1.25)
    b.observe_step(0.02, 0.1, 0.05, 2.0)
    a.val_score(0.8)
    a.observe_features(100, 40, 2400)

    def sample(name: str, trial: str) -> float | None:
        return REGISTRY.get_sample_value(name, {"trainer": "labels-trainer-0", "trial": trial})

    assert (sample("saintpipe_trainer_steps_total", "trial-000"), sample("saintpipe_trainer_steps_total", "trial-001")) \
        == (2, 1)
    assert (sample("saintpipe_trainer_loss", "trial-000"), sample("saintpipe_trainer_loss", "trial-001")) == (1.25, 2.0)
    assert sample("saintpipe_trainer_val_score", "trial-000") == 0.8
    assert sample("saintpipe_trainer_val_score", "trial-001") == 0  # not validated yet
    assert sample("saintpipe_trainer_feature_rows_total", "trial-000") == 100
    assert sample("saintpipe_trainer_step_seconds_count", "trial-001") == 1
    assert sample("saintpipe_trainer_steps_total", "") is None  # no trial-less series was made


def test_a_plain_trainer_has_an_empty_trial():
    assert TrainerSpec(job="j", dataset_dir="d", pool_url="redis://x", feature_addresses="h:1").trial == ""
    TrainerMetrics("plain-labels-trainer-0").observe_step(0.01, 0.0, 0.0, 1.0)
    text = generate_latest(REGISTRY).decode()
    assert 'saintpipe_trainer_steps_total{trainer="plain-labels-trainer-0",trial=""} 1.0' in text
