"""The trainer's run-directory files: metrics.jsonl as training goes, best.pt and final.pt, resuming."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from saintpipe.core.errors import DatasetError
from saintpipe.trainer.run_dir.checkpoint import Checkpointer
from saintpipe.trainer.config import ModelConfig, TrainerConfig
from saintpipe.trainer.loop import TrainLoop, model_digest
from saintpipe.trainer.run_dir.model_file import DatasetInfo, load_model, save_model
from saintpipe.trainer.models import build_model
from saintpipe.trainer.run_dir.outputs import MetricsLog, RunOutputs
from saintpipe.trainer.step import TrainState
from tests.unit.trainer.test_trainer_feeds_loop import ListFeed, small_graph

INFO = DatasetInfo(name="tiny", num_nodes=60, num_edges=240, feature_dim=5, num_classes=3, multilabel=False)


def make_loop(graph, run_dir, checkpoints=None, **cfg) -> TrainLoop:
    model = ModelConfig(arch="gcn", hidden=[8], dropout=0.0)
    state = TrainState(model, 5, 3, False, seed=0)
    return TrainLoop(state, graph, TrainerConfig(model=model, **cfg),
                     checkpointer=Checkpointer(checkpoints) if checkpoints else None,
                     outputs=RunOutputs(run_dir, INFO, "accuracy"))


def test_a_run_writes_a_line_per_validation_the_best_and_the_final_model(tmp_path):
    graph = small_graph()
    loop = make_loop(graph, tmp_path, epochs=3, patience=0)
    result = loop.run(ListFeed(graph))
    rows = MetricsLog(tmp_path / "metrics.jsonl").rows()
    assert [(r["event"], r["epoch"], r["step"]) for r in rows] == [
        ("validation", 1.0, 4), ("validation", 2.0, 8), ("validation", 3.0, 12), ("end", 3.0, 12)]
    losses = result.step_losses
    for row, (a, b) in zip(rows[:3], [(0, 4), (4, 8), (8, 12)], strict=True):
        assert row["train_loss"] == pytest.approx(float(np.mean(losses[a:b])))  # the steps since the last line
        assert row["metric"] == "accuracy" and 0.0 <= row["val_score"] <= 1.0
    assert [r["val_score"] for r in rows[:3]] == [score for _, score in result.val_history]
    assert rows[-1]["test_score"] == result.test_score and rows[-1]["best_epoch"] == result.best_val_epoch
    elapsed = [r["elapsed_s"] for r in rows]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0
    final = load_model(tmp_path / "final.pt")
    assert model_digest(final.model) == result.model_digest  # the weights training ended with
    best = load_model(tmp_path / "best.pt")
    assert best.meta["which"] == "best" and best.meta["test_score"] == result.test_score
    assert best.meta["step"] == loop.stopper.best_step and best.dataset == INFO
    for name, tensor in best.model.state_dict().items():
        torch.testing.assert_close(tensor, loop.stopper.best_state[name])


def test_a_resumed_run_appends_to_the_history_and_drops_lines_past_its_checkpoint(tmp_path):
    graph = small_graph()
    ckpt = tmp_path / "checkpoints"
    make_loop(graph, tmp_path, ckpt, epochs=10, max_steps=6, patience=0, checkpoint_every_steps=1).run(ListFeed(graph))
    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.append({"event": "validation", "epoch": 2.0, "step": 8, "val_score": 0.1})  # written, then interrupted
    second = make_loop(graph, tmp_path, ckpt, epochs=3, patience=0)
    assert second.state.steps == 6
    second.run(ListFeed(graph))
    rows = log.rows()
    assert [(r["event"], r["step"]) for r in rows] == [
        ("validation", 4), ("end", 6), ("validation", 8), ("validation", 12), ("end", 12)]
    assert rows[2]["val_score"] != 0.1  # the stale line went
    assert [r["elapsed_s"] for r in rows] == sorted(r["elapsed_s"] for r in rows)  # one clock over both parts


def test_metrics_lines_are_strict_json_and_a_torn_last_line_is_skipped(tmp_path):
    log = MetricsLog(tmp_path / "m.jsonl")
    log.append({"step": 1, "val_score": float("nan"), "best": float("-inf")})
    with open(log.path, "a") as fh:
        fh.write('{"step": 2, "val')  # a crash mid-line
    assert log.rows() == [{"step": 1, "val_score": None, "best": None}]
    assert json.loads(log.path.read_text().splitlines()[0])["val_score"] is None
    assert log.truncate_after(5) == 1 and log.path.read_text().count("\n") == 1  # the torn line is cut too


def test_a_model_file_rebuilds_its_model_and_refuses_what_is_not_one(tmp_path):
    model = build_model(ModelConfig(arch="sage", hidden=[8, 4]), 5, 3, False)
    path = save_model(tmp_path / "m.pt", model, INFO, step=3, val_score=float("nan"))
    raw = torch.load(path, weights_only=True)  # plain data and tensors only
    assert raw["format"] == "saintpipe-model" and raw["meta"] == {"step": 3, "val_score": None}
    loaded = load_model(path)
    assert model_digest(loaded.model) == model_digest(model) and not loaded.model.training
    assert loaded.model.config == model.config and loaded.dataset == INFO
    with pytest.raises(DatasetError, match="no model file there"):
        load_model(tmp_path / "missing.pt")
    torch.save({"train_state": {}}, tmp_path / "latest.pt")
    with pytest.raises(DatasetError, match="not a saintpipe model file"):
        load_model(tmp_path / "latest.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(DatasetError, match="junk.pt: unreadable model file"):
        load_model(tmp_path / "junk.pt")


def test_what_a_model_can_run_on():
    assert INFO.incompatible(DatasetInfo("other", 10, 20, 5, 3, False)) == ""  # another graph: fine
    assert "7 feature columns, the model reads 5" in INFO.incompatible(DatasetInfo("x", 60, 240, 7, 3, False))
    assert "4 classes" in INFO.incompatible(DatasetInfo("x", 60, 240, 5, 4, False))
    assert "multi-label labels" in INFO.incompatible(DatasetInfo("x", 60, 240, 5, 3, True))
