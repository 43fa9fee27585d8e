"""EvalWatch: how far a full-graph evaluation is, cutting it at a deadline or on a cancel, and layer-wise
inference reporting to it pass by pass."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.eval_watch import EvaluationCancelled, EvalWatch
from saintpipe.trainer.evaluate import EvalGraph, predict
from saintpipe.trainer.inference import InferenceLimits, LayerwiseInference
from saintpipe.trainer.models import build_model
from saintpipe.trainer.synthetic import random_subgraph


def graph(n: int = 60, f: int = 5) -> EvalGraph:
    sub = random_subgraph(n, 4.0, seed=2, mean_weights=True)
    rng = np.random.default_rng(1)
    splits = {"train": np.arange(20), "val": np.arange(20, 40), "test": np.arange(40, n)}
    return EvalGraph.from_arrays(sub.indptr, sub.indices, rng.normal(size=(n, f)).astype(np.float32),
                                 rng.integers(0, 3, n), splits)


class Recorder(EvalWatch):
    """Keeps every (phase, fraction) it was told."""

    def __init__(self, deadline=None, cancel_after: int | None = None) -> None:
        super().__init__(deadline)
        self.seen: list[tuple[str, float]] = []
        self.cancel_after = cancel_after

    def advance(self, within: float) -> None:
        super().advance(within)
        self.seen.append((self.status.phase, self.status.fraction))
        if self.cancel_after is not None and len(self.seen) >= self.cancel_after:
            self.cancel()


def model_for(arch: str, g: EvalGraph, **extra):
    hidden = [6, 6] if arch == "mixhop" else [4, 4]  # widths divisible by the paths
    config = ModelConfig(arch=arch, hidden=hidden, heads=2, dropout=0.0, **extra)
    return build_model(config, g.feature_dim, 3, False)


@pytest.mark.parametrize("arch,extra", [("gcn", {}), ("sage", {"classifier": "graph"}), ("gat", {}),
                                        ("mixhop", {"mixhop_powers": [0, 1, 3]})])
def test_every_pass_reports_and_the_fraction_climbs_to_one(arch, extra):
    g = graph()
    model = model_for(arch, g, **extra)
    watch = Recorder()
    logits = LayerwiseInference(model, g, InferenceLimits(block_rows=7, spill_bytes=0), watch=watch).logits()
    assert logits.shape == (g.num_nodes, 3)
    fractions = [f for _, f in watch.seen]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)  # the pass count was right
    assert "classifier" in {phase for phase, _ in watch.seen}
    assert not watch.status.running and watch.last_seconds > 0


def test_predict_records_the_time_of_an_evaluation_that_ended():
    g = graph()
    model = model_for("gcn", g)
    for max_bytes in (1 << 30, 1):  # one pass, then layer by layer
        watch = EvalWatch()
        predict(model, g, max_full_bytes=max_bytes, batch_nodes=8, watch=watch)
        assert watch.last_seconds > 0 and not watch.status.running


def test_a_cancel_cuts_layerwise_inference_between_blocks_and_leaves_no_files(tmp_path: Path):
    g = graph()
    model = model_for("gcn", g)
    watch = Recorder(cancel_after=5)
    limits = InferenceLimits(block_rows=4, spill_bytes=0, tmpdir=tmp_path)
    with pytest.raises(EvaluationCancelled):
        predict(model, g, max_full_bytes=1, batch_nodes=4, watch=watch)
    with pytest.raises(EvaluationCancelled):
        LayerwiseInference(model, g, limits, watch=Recorder(cancel_after=5)).logits()
    assert len(watch.seen) == 5 and math.isnan(watch.last_seconds) and not watch.status.running
    assert list(tmp_path.iterdir()) == []  # the spilled layer outputs went with it
    assert model.training  # its mode restored


def test_a_deadline_in_the_past_cuts_at_once_and_cut_at_none_lifts_it():
    g = graph()
    model = model_for("sage", g)
    watch = EvalWatch(deadline=time.time() - 1)
    with pytest.raises(EvaluationCancelled, match="deadline"):
        predict(model, g, watch=watch)
    watch.cut_at(None)
    assert predict(model, g, watch=watch).shape == (g.num_nodes, 3)


def test_cancel_only_reaches_an_evaluation_that_is_running():
    watch = EvalWatch()
    watch.cancel()  # nothing running: the next evaluation must not be cut by it
    watch.begin(2)
    watch.next_pass("a")
    watch.advance(0.5)
    assert watch.status.running and watch.status.phase == "a" and watch.status.fraction == pytest.approx(0.25)
    watch.cancel()
    with pytest.raises(EvaluationCancelled):
        watch.advance(1.0)
    watch.end(completed=False)
    assert not watch.status.running and math.isnan(watch.last_seconds)


@pytest.mark.parametrize("arch,extra", [("gcn", {}), ("gat", {}), ("mixhop", {}), ("sage", {"classifier": "graph"})])
def test_the_estimate_is_a_positive_figure_for_every_layer_kind(arch, extra):
    g = graph(200)
    model = model_for(arch, g, **extra)
    estimate = LayerwiseInference(model, g, InferenceLimits(block_rows=16)).estimate_seconds(samples=3)
    assert math.isfinite(estimate) and estimate > 0


def test_layerwise_peak_bytes_and_the_warning_when_they_outgrow_memory():
    from saintpipe.trainer.eval_memory import layerwise_peak_bytes, spill_warning

    n = 16_777_216  # Kronecker scale 24
    default = ModelConfig(arch="sage", hidden=[256, 256])
    assert layerwise_peak_bytes(n, 50, default) == 4 * n * 512  # layer 2: 256 in, 256 out
    assert layerwise_peak_bytes(n, 50, ModelConfig(arch="sage", hidden=[64, 64])) == 4 * n * 128
    mixhop = ModelConfig(arch="mixhop", hidden=[6], mixhop_powers=[0, 1, 2])
    assert layerwise_peak_bytes(n, 50, mixhop) == 4 * n * (3 * 50 + 6)  # X, AX, A²X and the output
    text = spill_warning(n, 50, default, available=20 << 30)
    assert text and "hidden [256, 256]" in text and "more than the 20.0 GiB of memory available" in text
    assert spill_warning(n, 50, ModelConfig(arch="sage", hidden=[64, 64]), available=20 << 30) is None
