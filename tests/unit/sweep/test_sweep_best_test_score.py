"""A sweep trial stopped before its final scoring (ASHA) gets the test score its best.pt holds: the one its
trainer's validation pass gave those weights, as a finished trial's final scoring reports it."""

from __future__ import annotations

import math

from saintpipe.sweep.results import best_test_score
from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.models import build_model
from saintpipe.trainer.run_dir import BEST
from saintpipe.trainer.run_dir.model_file import DatasetInfo, save_model

INFO = DatasetInfo(name="d", num_nodes=10, num_edges=20, feature_dim=4, num_classes=3, multilabel=False)


def model():
    return build_model(ModelConfig(arch="sage", hidden=[8]), 4, 3, multilabel=False)


def test_the_score_comes_from_best_pt(tmp_path):
    save_model(tmp_path / BEST, model(), INFO, which="best", step=12, val_score=0.7, test_score=0.68)
    assert best_test_score(tmp_path) == 0.68


def test_no_best_pt_an_unscored_one_or_a_damaged_one_gives_nan(tmp_path):
    assert math.isnan(best_test_score(tmp_path))  # stopped before its first validation
    save_model(tmp_path / BEST, model(), INFO, which="best", test_score=float("nan"))  # stored as None
    assert math.isnan(best_test_score(tmp_path))
    (tmp_path / BEST).write_bytes(b"not a model")
    assert math.isnan(best_test_score(tmp_path))
