"""Keep the model: a run's directory, ``saintpipe predict``, ``saintpipe embed`` and ``saintpipe run --resume``.

One run (module fixture) on a small demo dataset trains with no epoch limit
and is stopped by SIGINT after a few validations; ``--resume RUN_DIR`` then
finishes it (its epoch budget raised through the environment, which overrides
the stored config). The tests read the run directory both parts left, and use
its model through the real console script.
"""

from __future__ import annotations

import csv
import json
import math
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from tests.support.cli import run_cli, saintpipe_command

from tests.support.pipeline import PipelineProcess, small_dataset, write_config

CONFIG = """
[run]
progress = false
metrics = false
[trainer]
epochs = 100000
patience = 0
[samplers]
norm_subgraphs = 16
[samplers.sampler]
roots = 150
"""

STARTUP_S = 120
MORE_EPOCHS = 3


def metric_lines(run_dir) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """(run dir, the interrupted part's lines and summary, the resumed part's process, its JSON summary)."""
    work = tmp_path_factory.mktemp("rundir")
    dataset = small_dataset(work / "small")
    cfg = write_config(work / "run.toml", CONFIG)
    run_dir = work / "run"
    env = {"SAINTPIPE_HOME": str(work / "home")}
    first = PipelineProcess(saintpipe_command(), ["run", "--data", str(dataset), "--config", str(cfg),
                                                  "--run-dir", str(run_dir)], work, env=env)
    try:
        first.wait_for_line(r"^training started", STARTUP_S)
        deadline = time.monotonic() + 120
        while len([r for r in metric_lines(run_dir) if r["event"] == "validation"]) < 3:
            assert first.proc.poll() is None and time.monotonic() < deadline, first.output()
            time.sleep(0.2)
        first.signal(signal.SIGINT)
        assert first.wait(120) == 130, first.output()
    finally:
        first.cleanup()
    before = metric_lines(run_dir)
    interrupted = json.loads((run_dir / "summary.json").read_text())
    epochs = int(max(r["epoch"] for r in before)) + MORE_EPOCHS
    second_dir = work / "second"
    second_dir.mkdir()
    second = PipelineProcess(saintpipe_command(), ["run", "--resume", str(run_dir), "--json"], second_dir,
                             env={**env, "SAINTPIPE_TRAINER__EPOCHS": str(epochs)})
    try:
        assert second.wait(STARTUP_S + 180) == 0, second.output()
    finally:
        second.cleanup()
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    return run_dir, dataset, before, interrupted, second, summary, epochs


def test_the_run_directory_holds_the_models_the_config_the_history_and_the_summary(resumed):
    run_dir, dataset, before, interrupted, second, summary, epochs = resumed
    for name in ("config.json", "metrics.jsonl", "best.pt", "final.pt", "summary.json", "checkpoints/latest.pt"):
        assert (run_dir / name).is_file(), name
    assert interrupted["stopped_by"] == "SIGINT" and interrupted["run_dir"] == str(run_dir)  # kept when stopped
    assert summary["run_dir"] == str(run_dir) == json.loads((run_dir / "summary.json").read_text())["run_dir"]
    assert re.search(rf"^run directory\s+{re.escape(str(run_dir))}$", second.stdout, re.M), second.stdout
    stored = json.loads((run_dir / "config.json").read_text())
    assert stored["run"]["data"] == str(dataset.resolve()) and stored["trainer"]["epochs"] == epochs
    # Model files: plain data and tensors, with what rebuilds the model.
    best = torch.load(run_dir / "best.pt", weights_only=True)
    assert best["model"]["config"]["arch"] == "sage" and best["dataset"]["num_nodes"] == 3000
    assert best["dataset"]["feature_dim"] == best["model"]["in_dim"] and best["meta"]["which"] == "best"
    assert best["meta"]["test_score"] == pytest.approx(summary["test_score"])


def test_resume_goes_on_from_the_checkpoint_and_appends_to_the_same_history(resumed):
    run_dir, _, before, _, second, summary, epochs = resumed
    assert summary["stopped_by"] == "finished" and summary["epochs"] == epochs
    start = summary["resumed_from_step"]
    assert start > 0 and f"trainers resumed from step {start} " in second.stdout
    assert summary["steps"] > start and len(summary["step_losses"]) == summary["steps"]  # the whole run's steps
    lines = metric_lines(run_dir)
    validations = [r for r in lines if r["event"] == "validation"]
    # Both parts, one history: every epoch validated once (lines past the checkpoint were trained again).
    assert [r["epoch"] for r in validations] == [float(e) for e in range(1, epochs + 1)]
    assert [r for r in before if r["step"] <= start] == lines[:len([r for r in before if r["step"] <= start])]
    steps = [r["step"] for r in lines]
    assert steps == sorted(steps) and lines[-1]["event"] == "end" and lines[-1]["step"] == summary["steps"]
    assert lines[-1]["test_score"] == pytest.approx(summary["test_score"])
    assert all(math.isfinite(r["train_loss"]) and r["train_loss"] > 0 for r in validations)
    elapsed = [r["elapsed_s"] for r in lines]
    assert elapsed == sorted(elapsed)  # one clock over both parts
    assert [round(s, 6) for _, s in summary["val_history"]] == [round(r["val_score"], 6) for r in validations]


def test_predict_matches_the_trainers_own_test_accuracy(resumed, tmp_path):
    run_dir, dataset, _, _, _, summary, _ = resumed
    from saintpipe.services.dataset.store import open_dataset

    data = open_dataset(dataset)
    out = tmp_path / "test.csv"
    done = run_cli("predict", str(run_dir), "--nodes", "test", "--out", str(out))
    assert "wrote 900 predictions (class ids, best model)" in done.stderr
    # the start-up report: seconds since the command started, in the order things became ready
    at = re.search(r"in (\d+\.\d) s \(model ready at (\d+\.\d) s, dataset at (\d+\.\d) s\)", done.stderr)
    assert at is not None, done.stderr
    total, model, dataset_ready = map(float, at.groups())
    assert 0 < model <= dataset_ready <= total
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["node", "label"]
    ids = np.array([int(r[0]) for r in rows[1:]])
    labels = np.array([int(r[1]) for r in rows[1:]])
    assert ids.tolist() == data.splits["test"].tolist()  # the order given
    accuracy = float((labels == data.labels[ids]).mean())
    # Layer-wise inference vs the trainer's one-pass evaluation: equal up to float rounding (a tie at most)
    assert abs(accuracy - summary["test_score"]) <= 1.5 / ids.size, (accuracy, summary["test_score"])
    run_cli("predict", str(run_dir), "--nodes", "17,3,17", "--checkpoint", "final", "--out", str(tmp_path / "p.npy"))
    few = np.load(tmp_path / "p.npy")
    assert few.dtype == np.int64 and few.shape == (3,) and few[0] == few[2] and 0 <= few.min() <= few.max() < 8


def test_embed_writes_the_hidden_layer_of_every_node(resumed, tmp_path):
    run_dir, dataset, *_ = resumed
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.trainer.evaluate import EvalGraph
    from saintpipe.trainer.run_dir.model_file import load_model

    out = tmp_path / "emb.npy"
    run_cli("embed", str(run_dir), "--out", str(out))
    emb = np.load(out)
    assert emb.shape == (3000, 128) and emb.dtype == np.float32 and np.isfinite(emb).all()
    assert (emb >= 0).all() and emb.std() > 0  # after the ReLU, not constant
    # The same rows computed directly: the model's own one-pass forward over the whole graph.
    saved = load_model(run_dir / "best.pt")
    with torch.no_grad():
        hidden = saved.model.embed(EvalGraph.from_dataset(open_dataset(dataset)).full_batch()).numpy()
    nodes = [0, 1, 1234, 2999]
    np.testing.assert_allclose(emb[nodes], hidden[nodes], rtol=1e-4, atol=1e-5)
    run_cli("embed", str(run_dir), "--layer", "1", "--out", str(tmp_path / "l1.npy"))
    assert np.load(tmp_path / "l1.npy").shape == (3000, 128)


def test_predict_and_embed_errors_are_one_line(resumed, tmp_path):
    run_dir, *_ = resumed
    cases = [
        (["predict", str(tmp_path / "nope")], "no such run directory"),
        (["predict", str(run_dir), "--nodes", "5,3000"], "node id 3000 out of range"),
        (["embed", str(run_dir), "--layer", "3"], "--layer 3: the model has graph layers 1 to 2"),
        (["predict", str(run_dir / "checkpoints")], "not a run directory"),
    ]
    # Four commands that each only import and refuse (some 2 s of CPU): two at a time, one per core.
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda case: run_cli(*case[0], check=False), cases))
    for (args, message), done in zip(cases, results, strict=True):
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and lines[0].startswith("saintpipe: error:"), done.stderr
