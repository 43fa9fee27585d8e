"""The run directory: its name, config.json read back, what --resume accepts, finding the model, node lists."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import numpy as np
import pytest

from saintpipe.core.errors import ConfigError, InvalidArgument
from saintpipe.core.paths import new_run_dir
from saintpipe.pipeline.config import load_pipeline_config
from saintpipe.pipeline.predict import read_nodes
from saintpipe.pipeline.run_dir import model_path, resume_target, stored_config, write_config
from saintpipe.pipeline.summary import RunSummary, format_summary


def test_run_directories_sort_by_start_time_and_never_collide(tmp_path):
    first = new_run_dir("local", tmp_path)
    second = new_run_dir("local", tmp_path)
    assert re.fullmatch(r"\d{8}-\d{6}-local", first.name), first.name
    assert first != second and first.is_dir() and second.is_dir()
    assert second.name.startswith(first.name[:15])  # same second: a suffix, not a shared directory


def test_the_stored_config_reads_back_to_the_same_configuration(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('[run]\ntrainers = 2\n[samplers]\nworkers = 3\n[samplers.sampler]\nkind = "node"\n'
                    'node_budget = 700\n[trainer]\nepochs = 7\n[trainer.model]\narch = "gat"\nhidden = [8]\n')
    config = load_pipeline_config(toml, data=tmp_path / "ds", run_dir=tmp_path / "run", environ={})
    config.trainer.checkpoint_dir = tmp_path / "run" / "checkpoints"
    (tmp_path / "run").mkdir()
    path = write_config(tmp_path / "run", config)
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # it may hold the pool's URL with a password
    again = load_pipeline_config(stored=path, environ={})
    assert again == config
    assert json.loads(stored_config(config))["samplers"].get("pool") is None  # the runner's own fields left out
    # What is given now overrides the stored run: flags, then the environment, then a config file.
    later = load_pipeline_config(stored=path, environ={"SAINTPIPE_TRAINER__EPOCHS": "9"}, data=tmp_path / "other")
    assert (later.trainer.epochs, later.run.data, later.trainer.model.arch) == (9, tmp_path / "other", "gat")


def test_a_bad_stored_value_names_the_stored_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"trainer": {"epochs": -1}}))
    with pytest.raises(ConfigError, match=r"trainer\.epochs: .* \(from .*config\.json\)"):
        load_pipeline_config(stored=path, environ={})


def run_dir(tmp_path: Path, checkpoint: bool = True, checkpoint_dir: str | None = "checkpoints") -> Path:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    ckpt = str(run / checkpoint_dir) if checkpoint_dir else None
    (run / "config.json").write_text(json.dumps({"trainer": {"checkpoint_dir": ckpt}}))
    if checkpoint:
        (run / "checkpoints" / "latest.pt").write_bytes(b"x")
    return run


def test_resume_takes_the_run_directory_or_its_checkpoints(tmp_path):
    run = run_dir(tmp_path)
    for given in (run, run / "checkpoints"):
        target = resume_target(given)
        assert (target.run_dir, target.config, target.checkpoint_dir) == (run, run / "config.json",
                                                                           run / "checkpoints")
    bare = tmp_path / "elsewhere"
    bare.mkdir()
    (bare / "latest.pt").write_bytes(b"x")
    assert resume_target(bare) == type(target)(None, None, bare)  # a checkpoint directory of no run


@pytest.mark.parametrize("case,message", [
    ("missing", "no such directory"),
    ("empty", r"neither a run directory \(no config.json\) nor a checkpoint directory \(no latest.pt\)"),
    ("no-checkpoint-yet", "nothing to resume from: no checkpoint yet in"),
    ("checkpoints-off", r"the run kept no checkpoints \(\[run\] checkpoints = false\)"),
])
def test_resume_says_in_one_line_why_it_cannot(tmp_path, case, message):
    if case == "missing":
        path = tmp_path / "nope"
    elif case == "empty":
        path = tmp_path
    elif case == "no-checkpoint-yet":
        path = run_dir(tmp_path, checkpoint=False)
    else:
        path = run_dir(tmp_path, checkpoint=False, checkpoint_dir=None)
        (path / "checkpoints").rmdir()
    with pytest.raises(ConfigError, match=message) as info:
        resume_target(path)
    assert str(info.value).startswith(f"--resume {path}") and "\n" not in str(info.value)


def test_the_model_of_a_run_directory_or_why_it_is_not_there(tmp_path):
    run = run_dir(tmp_path)
    with pytest.raises(ConfigError, match="the run stopped before its first validation"):
        model_path(run, "best")
    (run / "metrics.jsonl").write_text("{}\n")
    (run / "best.pt").write_bytes(b"x")
    assert model_path(run, "best") == run / "best.pt"
    assert model_path(run / "best.pt") == run / "best.pt"  # a model file itself
    with pytest.raises(ConfigError, match="did not finish .* --checkpoint best"):
        model_path(run, "final")
    with pytest.raises(ConfigError, match="no such run directory"):
        model_path(tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"not a run directory \(no config.json, no best.pt\)"):
        model_path(tmp_path / "run" / "checkpoints")


def test_node_lists_from_ids_files_and_splits(tmp_path):
    dataset = types.SimpleNamespace(num_nodes=10, splits={"test": np.array([7, 8, 9])})
    assert read_nodes("test", dataset).tolist() == [7, 8, 9]
    assert read_nodes("3, 1,4", dataset).tolist() == [3, 1, 4]  # the order given, kept
    (tmp_path / "ids.txt").write_text("5 6\n2,0\n")
    assert read_nodes(str(tmp_path / "ids.txt"), dataset).tolist() == [5, 6, 2, 0]
    np.save(tmp_path / "ids.npy", np.array([9, 1], dtype=np.int32))
    assert read_nodes(str(tmp_path / "ids.npy"), dataset).tolist() == [9, 1]
    with pytest.raises(InvalidArgument, match=r"node id 10 out of range \(the dataset has 10 nodes, ids 0 to 9\)"):
        read_nodes("1,10", dataset)
    (tmp_path / "bad.txt").write_text("1\n2 x7\n")
    with pytest.raises(InvalidArgument, match=r"bad.txt: line 2: 'x7' is not a node id"):
        read_nodes(str(tmp_path / "bad.txt"), dataset)
    with pytest.raises(InvalidArgument, match="neither a split name"):
        read_nodes("validation", dataset)


def test_the_summary_ends_with_the_run_directory_and_says_when_it_resumed():
    summary = RunSummary(dataset="d", run_dir="/runs/x", checkpoint_dir="/runs/x/checkpoints", resumed_from_step=40)
    text = format_summary(summary)
    assert re.fullmatch(r"run directory\s+/runs/x", text.splitlines()[-1])  # last: what to do next starts there
    assert re.search(r"^resumed from\s+step 40 ", text, re.M)
    assert "checkpoints  " not in text  # inside the run directory: not repeated
    assert json.loads(summary.to_json())["run_dir"] == "/runs/x"
    elsewhere = format_summary(RunSummary(dataset="d", run_dir="/runs/x", checkpoint_dir="/ckpt"))
    assert re.search(r"^checkpoints\s+/ckpt$", elsewhere, re.M)


def test_a_model_runs_on_its_dataset_and_refuses_one_it_does_not_fit(tmp_path, caplog):
    from saintpipe.core.errors import DatasetError
    from saintpipe.pipeline.predict import open_session, predict_labels
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import open_dataset, write_dataset
    from saintpipe.trainer.config import ModelConfig
    from saintpipe.trainer.inference import InferenceLimits
    from saintpipe.trainer.run_dir.model_file import DatasetInfo, save_model
    from saintpipe.trainer.models import build_model

    write_dataset(tmp_path / "ds", **generate_demo(num_nodes=300, feature_dim=16, seed=1))
    write_dataset(tmp_path / "bigger", **generate_demo(num_nodes=400, feature_dim=16, seed=2))
    write_dataset(tmp_path / "wide", **generate_demo(num_nodes=300, feature_dim=20, seed=1))
    model = build_model(ModelConfig(arch="sage", hidden=[8]), 16, 8, False)
    save_model(tmp_path / "best.pt", model, DatasetInfo.from_dataset(open_dataset(tmp_path / "ds")))
    limits = InferenceLimits(block_rows=64)
    session = open_session(tmp_path / "best.pt", "best", None, limits)  # the dataset its model file names
    assert session.dataset.path.resolve() == (tmp_path / "ds").resolve()
    labels = predict_labels(session.inference(), False, np.array([5, 1, 5]))
    assert labels.dtype == np.int64 and labels.shape == (3,) and labels[0] == labels[2]
    with caplog.at_level("WARNING"):
        other = open_session(tmp_path / "best.pt", "best", tmp_path / "bigger", limits)  # another graph: allowed
    assert predict_labels(other.inference(), False).shape == (400,) and "a graph it never saw" in caplog.text
    with pytest.raises(DatasetError, match=r"wide: does not fit the model: 20 feature columns, the model reads 16"):
        open_session(tmp_path / "best.pt", "best", tmp_path / "wide", limits)
