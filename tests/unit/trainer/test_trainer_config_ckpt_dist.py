"""Trainer configuration, checkpoint files, the gloo gradient average and the metrics endpoint."""

from __future__ import annotations

import urllib.request

import pytest
import torch

from saintpipe.core.config import load_config
from saintpipe.core.errors import ConfigError, DatasetError
from saintpipe.trainer.run_dir.checkpoint import Checkpointer
from saintpipe.trainer.config import ModelConfig, TrainerConfig


def test_model_config_checks_widths_and_powers():
    with pytest.raises(ValueError, match="divisible by 2"):
        ModelConfig(arch="sage", hidden=[31])
    with pytest.raises(ValueError, match="divisible by 4"):
        ModelConfig(arch="gat", heads=4, hidden=[6])
    with pytest.raises(ValueError, match="distinct"):
        ModelConfig(arch="mixhop", mixhop_powers=[1, 1], hidden=[8])
    assert ModelConfig(arch="mixhop", mixhop_powers=[2, 0], hidden=[8]).mixhop_powers == [0, 2]


def test_trainer_config_from_file_env_and_flags_names_bad_field(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(
        '[trainer]\nepochs = 7\n[trainer.model]\narch = "gcn"\nhidden = [16]\norder = "xw_first"\n'
    )
    cfg = load_config(
        TrainerConfig,
        path,
        flags={"max_steps": 3},
        environ={"SAINTPIPE_TRAINER__PATIENCE": "2"},
        section="trainer",
    )
    assert (cfg.epochs, cfg.max_steps, cfg.patience, cfg.model.arch, cfg.model.order) == (
        7,
        3,
        2,
        "gcn",
        "xw_first",
    )
    path.write_text('[trainer.model]\norder = "fastest"\n')
    with pytest.raises(ConfigError, match=r"model\.order"):
        load_config(TrainerConfig, path, environ={}, section="trainer")


def test_checkpoints_are_atomic_and_pruned(tmp_path):
    ckpt = Checkpointer(tmp_path / "c", keep=2)
    assert ckpt.load() is None
    for step in (1, 2, 3):
        ckpt.save({"step": step, "w": torch.full((2,), float(step))}, step=step)
    assert ckpt.load()["step"] == 3
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        "latest.pt",
        "step-000000002.pt",
        "step-000000003.pt",
    ]
    ckpt.latest.write_bytes(b"torn")
    with pytest.raises(DatasetError, match="latest.pt: unreadable checkpoint"):
        ckpt.load()


def test_metrics_endpoint_serves_the_contract_names():
    from saintpipe.trainer.metrics import TrainerMetrics, serve_metrics

    metrics = TrainerMetrics("unit-metrics")
    metrics.observe_step(0.02, 0.5, 0.1, 1.25)
    metrics.val_score(0.75)
    server = serve_metrics(0)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    for line in (
        'saintpipe_trainer_steps_total{trainer="unit-metrics",trial=""} 1.0',
        'saintpipe_trainer_data_wait_seconds_total{trainer="unit-metrics",trial=""} 0.5',
        'saintpipe_trainer_fetch_seconds_total{trainer="unit-metrics",trial=""} 0.1',
        'saintpipe_trainer_loss{trainer="unit-metrics",trial=""} 1.25',
        'saintpipe_trainer_val_score{trainer="unit-metrics",trial=""} 0.75',
        'saintpipe_trainer_step_seconds_count{trainer="unit-metrics",trial=""} 1.0',
    ):
        assert line in text
