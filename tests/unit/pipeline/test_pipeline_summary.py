"""The end-of-run summary and the per-epoch progress bars."""

from __future__ import annotations

import io
import json
import math
import re

from saintpipe.pipeline.progress import EpochBars
from saintpipe.trainer.progress import TrainerProgress
from saintpipe.pipeline.summary import RunSummary, format_summary
from saintpipe.trainer.timing import TimeBreakdown


def summary(**kw) -> RunSummary:
    base = dict(dataset="demo (30,000 nodes)", test_score=0.9811, val_score=0.98, epochs=10, steps=109,
                subgraphs_trained=109, subgraphs_sampled=141, sampler_workers=1, trainers=1, training_seconds=10.0,
                times=TimeBreakdown(sampling=1.5, sampler_pool_wait=9.0, feature_fetch=1.1, compute=6.0, data_wait=2.0,
                                evaluation=2.0, startup=15.9, wall=25.2))
    base.update(kw)
    return RunSummary(**base)


def test_the_table_has_scores_work_and_where_the_time_went():
    text = format_summary(summary())
    lines = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines()[1:] if "  " in line)
    assert lines["test accuracy"] == "0.9811"
    assert lines["subgraphs trained on"] == "109  (10.9/s)"
    assert lines["sampler throughput"] == "14.1 subgraphs/s  (1 worker)"
    assert "normalization" not in lines and lines["trainers"] == "1"


def test_the_table_names_the_estimator_and_the_trainers_device():
    text = format_summary(summary(sampler_workers=2, trainers=2, trainer_device="cuda:0",
                                  normalization="online (the random_walk sampler's prior, refined ...)"))
    lines = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines()[1:] if "  " in line)
    assert lines["sampler throughput"].endswith("(2 workers)")
    assert lines["trainers"] == "2  (on cuda:0)"
    assert lines["normalization"].startswith("online (")
    assert lines["compute (trainers)"] == "6.0 s  (60.0%)"  # of the trainers' 10 s
    assert lines["waiting for data (trainers)"] == "2.0 s  (20.0%)"
    assert lines["sampling (sampler workers)"] == "1.5 s"


def test_an_interrupted_run_says_so_and_has_no_score():
    text = format_summary(summary(test_score=math.nan, val_score=math.nan, stopped_by="SIGINT", training_seconds=0))
    assert "n/a (not scored)" in text and "SIGINT" in text and "nan subgraphs/s" in text


def test_json_has_the_same_figures():
    data = json.loads(summary().to_json())
    assert data["test_score"] == 0.9811 and data["times"]["compute"] == 6.0
    assert data["sampler_throughput"] == 14.1


def bar_lines(out: io.StringIO) -> list[str]:
    return [chunk.strip() for chunk in out.getvalue().replace("\r", "\n").splitlines() if chunk.strip()]


class Terminal(io.StringIO):
    """A stream that says it is a terminal: the bars are drawn (tests/unit/pipeline/test_pipeline_progress.py
    has the plain lines written to anything else)."""

    def isatty(self) -> bool:
        return True


def test_one_bar_per_epoch_each_finishing_full_with_its_scores():
    out = Terminal()
    bars = EpochBars(3, file=out)
    bars.update(TrainerProgress(epoch=0, epoch_fraction=0.5, steps=1, subgraphs=1, loss=2.0))
    bars.update(TrainerProgress(epoch=2, epoch_fraction=0.25, steps=5, subgraphs=5, loss=1.0, val_score=0.7))
    bars.update(TrainerProgress(epoch=3, epoch_fraction=0.0, steps=7, subgraphs=7, loss=0.5, val_score=0.8,
                                done=True))
    bars.close()
    lines = bar_lines(out)
    finals = {}
    for line in lines:
        finals[line.split("%")[0].rsplit(None, 1)[0]] = line
    assert set(finals) == {"epoch 1/3", "epoch 2/3", "epoch 3/3"}
    assert all("100%" in line for line in finals.values())
    assert "loss 0.5000, val 0.8000" in finals["epoch 3/3"]
    assert any(line.startswith("epoch 1/3  50%") for line in lines)


def test_bars_can_be_switched_off():
    out = io.StringIO()
    bars = EpochBars(3, enabled=False, file=out)
    bars.update(TrainerProgress(epoch=1, epoch_fraction=0.5))
    bars.close()
    assert out.getvalue() == ""


def test_the_feature_cache_hit_rate_and_bytes_per_step_are_printed_and_in_the_json():
    s = summary(feature_cache="3,000 pinned + 6,000 LRU rows of 30,000", feature_gathers=110, feature_rows=250_000,
                feature_cache_hits=200_000, feature_bytes=12_800_000)
    lines = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in format_summary(s).splitlines()[1:]
                 if "  " in line)
    assert lines["feature cache hit rate"] == "80.0%  (cache: 3,000 pinned + 6,000 LRU rows of 30,000)"
    assert lines["feature bytes per step"] == "116.4 kB  (12.8 MB fetched for 110 subgraphs)"
    data = json.loads(s.to_json())
    assert data["feature_cache_hit_rate"] == 0.8 and data["feature_bytes_per_step"] == 12_800_000 / 110
    assert data["feature_rows"] == 250_000 and data["feature_bytes"] == 12_800_000
    # No training gather (an interrupted start): no feature lines, NaN in the JSON.
    assert "feature cache" not in format_summary(summary())
    assert math.isnan(json.loads(summary().to_json())["feature_cache_hit_rate"])


def test_the_loss_spike_ratio_is_printed_on_one_line_and_the_json_has_every_step():
    losses = [5.0, 3.0, 1.0, 1.2, 3.8, 0.9, 1.0]  # a spike of 3.8 over a median of 1.0 after epoch 1
    s = summary(steps=7, step_losses=losses, step_epochs=[0, 0, 1, 1, 1, 2, 2], best_val_epoch=2.0,
                val_history=[[1.0, 0.9], [2.0, 0.98]])
    lines = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in format_summary(s).splitlines()[1:]
                 if "  " in line)
    assert lines["loss spike ratio"] == "3.8  (largest step loss 3.8 / median 1, 5 steps after the warm-up)"
    assert lines["best validation accuracy"] == "0.9800  (epoch 2)"
    data = json.loads(s.to_json())
    assert data["loss_spike_ratio"] == 3.8 and data["step_losses"] == losses
    assert data["step_epochs"] == [0, 0, 1, 1, 1, 2, 2] and data["best_val_epoch"] == 2.0
    assert data["val_history"] == [[1.0, 0.9], [2.0, 0.98]]


def test_without_steps_after_the_first_epoch_the_ratio_is_nan_and_says_why():
    s = summary(step_losses=[2.0, 1.0], step_epochs=[0, 0])
    assert "loss spike ratio" in format_summary(s) and "n/a (no step after the warm-up" in format_summary(s)
    assert math.isnan(json.loads(s.to_json())["loss_spike_ratio"])
    assert "(epoch" not in format_summary(s)  # no best epoch known: none printed


def test_a_diverged_step_makes_the_ratio_infinite_and_the_line_says_so():
    s = summary(step_losses=[2.0, 1.0, float("nan")], step_epochs=[0, 1, 1])
    assert "inf (1 step loss(es) after the warm-up not finite: training diverged)" in format_summary(s)
    assert json.loads(s.to_json())["loss_spike_ratio"] == math.inf
