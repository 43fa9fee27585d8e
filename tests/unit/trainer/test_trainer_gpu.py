"""On a CUDA device the scheduled ops and the models give the CPU's results (GPU machines only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from saintpipe.trainer.batch import batch_from_subgraph
from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.models import build_model
from saintpipe.trainer.synthetic import random_subgraph

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("arch", ["gcn", "sage", "gat", "mixhop"])
def test_cuda_matches_cpu(arch):
    sub = random_subgraph(300, 8.0, seed=1)
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(300, 24)).astype(np.float32)
    labels = rng.integers(0, 5, 300)
    results = []
    for device in ("cpu", "cuda"):
        batch = batch_from_subgraph(
            sub, feats, labels, np.ones(300, bool), np.diff(sub.indptr) + 1, device=device
        )
        torch.manual_seed(0)
        model = build_model(
            ModelConfig(arch=arch, hidden=[48, 24], dropout=0.0, heads=2, mixhop_powers=[0, 1, 2]),
            24,
            5,
            False,
        ).to(device)
        loss = model.loss(model(batch), batch)
        loss.backward()
        results.append((loss.item(), [p.grad.cpu() for p in model.parameters()]))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-4)
    for cpu, gpu in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(gpu, cpu, rtol=1e-3, atol=1e-4)
