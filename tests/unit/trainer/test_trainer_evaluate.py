"""Evaluation: layer-by-layer in node batches equals the one-pass full-graph forward; the scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.evaluate import EvalGraph, evaluate, predict, score
from saintpipe.trainer.models import build_model
from saintpipe.trainer.synthetic import random_subgraph


def graph(n: int = 300, f: int = 12, classes: int = 4, multilabel: bool = False) -> EvalGraph:
    sub = random_subgraph(n, 5.0, 11)
    rng = np.random.default_rng(0)
    labels = (rng.random((n, classes)) < 0.3).astype(np.uint8) if multilabel else rng.integers(0, classes, n)
    perm = rng.permutation(n)
    splits = {"train": np.sort(perm[:100]), "val": np.sort(perm[100:200]), "test": np.sort(perm[200:])}
    return EvalGraph.from_arrays(
        sub.indptr, sub.indices, rng.normal(size=(n, f)).astype(np.float32), labels, splits
    )


@pytest.mark.parametrize(
    "arch,extra", [("gcn", {}), ("sage", {}), ("gat", {"heads": 2}), ("mixhop", {"mixhop_powers": [0, 1, 2]})]
)
def test_layerwise_batches_equal_full_graph_pass(arch, extra):
    g = graph()
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch=arch, hidden=[12, 6], **extra), g.feature_dim, g.num_classes, False)
    full = predict(model, g)
    layerwise = predict(model, g, max_full_bytes=1, batch_nodes=37)
    torch.testing.assert_close(layerwise, full, rtol=1e-4, atol=1e-5)
    assert model.training  # predict restores the mode it found


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_layerwise_batches_equal_full_graph_pass_with_a_graph_classifier(arch):
    g = graph()
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch=arch, hidden=[12], classifier="graph"), g.feature_dim, g.num_classes, False)
    full = predict(model, g)
    torch.testing.assert_close(predict(model, g, max_full_bytes=1, batch_nodes=37), full, rtol=1e-4, atol=1e-5)
    dense = build_model(ModelConfig(arch=arch, hidden=[12]), g.feature_dim, g.num_classes, False)
    dense.load_state_dict(model.state_dict())  # the same weights: only the output layer's propagation differs
    assert not torch.allclose(predict(dense, g), full)


def test_scores():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [0.0, 5.0]])
    assert score(logits, np.array([0, 1, 1, -1]), multilabel=False) == pytest.approx(2 / 3)
    multi = torch.tensor([[1.0, -1.0], [1.0, 1.0]])
    truth = np.array([[1, 1], [0, 1]], dtype=np.uint8)
    # tp = 2, fp = 1, fn = 1 -> 2·2 / (2·2 + 1 + 1)
    assert score(multi, truth, multilabel=True) == pytest.approx(4 / 6)


def test_evaluate_multilabel_uses_f1():
    g = graph(multilabel=True)
    model = build_model(ModelConfig(arch="sage", hidden=[8]), g.feature_dim, g.num_classes, True)
    scores = evaluate(model, g)
    assert set(scores) == {"val", "test"} and all(0.0 <= s <= 1.0 for s in scores.values())
