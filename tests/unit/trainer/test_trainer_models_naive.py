"""Every model, every forced and scheduled order: outputs and gradients equal a plain-autograd implementation.

The naive side builds A as a dense matrix from the subgraph's forward weights
only (its transpose comes from autograd), computes GAT attention the textbook
way (W x first, then a·, masked dense softmax), and MixHop powers by repeated
dense products. The model side runs the scheduled sparse chains, whose
backward passes multiply by the sampler's transposed weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from saintpipe.trainer.batch import batch_from_subgraph
from saintpipe.trainer.config import ModelConfig
from saintpipe.core.tensors import weighted_loss
from saintpipe.trainer.models import build_model
from saintpipe.trainer.synthetic import random_subgraph


def make_batch(n: int, f_in: int, classes: int, multilabel: bool, seed: int = 0):
    sub = random_subgraph(n, 6.0, seed)
    rng = np.random.default_rng(seed + 1)
    feats = rng.normal(size=(n, f_in)).astype(np.float32)
    labels = (rng.random((n, classes)) < 0.3).astype(np.uint8) if multilabel else rng.integers(0, classes, n)
    train = rng.random(n) < 0.7
    degrees = np.diff(sub.indptr) + rng.integers(0, 5, n)  # full-graph degrees exceed subgraph ones
    return batch_from_subgraph(sub, feats, labels, train, degrees)


def to_double(batch):
    batch.adj = batch.adj.with_weights(batch.adj.values.double(), batch.adj.values_t.double(), None)
    batch.degrees = batch.degrees.double()
    batch.loss_weights = batch.loss_weights.double()
    if batch.multilabel:
        batch.labels = batch.labels.double()
    batch.x = batch.x.double()
    return batch


def dense_adj(batch, self_loops: bool) -> torch.Tensor:
    op = batch.adj
    a = torch.zeros(op.n, op.n, dtype=op.values.dtype)
    a[op.rows, op.col.long()] = op.values
    if not self_loops:
        return a
    d = batch.degrees
    return torch.diag(1.0 / (1.0 + d)) + (d / (1.0 + d))[:, None] * a


def naive_forward(model, batch, x: torch.Tensor) -> torch.Tensor:
    cfg = model.config
    act = torch.relu
    a_tilde = dense_adj(batch, self_loops=False)
    a_hat = dense_adj(batch, self_loops=True)
    h = x
    for layer in model.layers:
        if cfg.arch == "gcn":
            y = a_hat @ h @ layer.weight
        elif cfg.arch == "sage":
            y = torch.cat([a_tilde @ h @ layer.weight_neigh, h @ layer.weight_self], 1)
        elif cfg.arch == "mixhop":
            parts = []
            for k, w in zip(layer.powers, layer.weights):
                parts.append(torch.linalg.matrix_power(a_hat, k) @ h @ w)
            y = torch.cat(parts, 1)
        else:
            heads = []
            mask = a_hat > 0
            for hd in range(layer.heads):
                sl = slice(hd * layer.head_dim, (hd + 1) * layer.head_dim)
                wx = h @ layer.weight[:, sl]
                src, dst = wx @ layer.att_src[hd], wx @ layer.att_dst[hd]
                e = torch.nn.functional.leaky_relu(dst[:, None] + src[None, :], layer.negative_slope)
                e = e.masked_fill(~mask, float("-inf"))
                p = torch.exp(e - e.max(1, keepdim=True).values) * a_hat
                att = p / p.sum(1, keepdim=True)
                heads.append(att @ wx)
            y = torch.cat(heads, 1)
        h = act(y + layer.bias)
    return h @ model.classifier + model.classifier_bias


ARCHS = {
    "gcn": {"arch": "gcn"},
    "sage": {"arch": "sage"},
    "gat": {"arch": "gat", "heads": 2},
    "mixhop": {"arch": "mixhop", "mixhop_powers": [0, 1, 2]},
}


@pytest.mark.parametrize("order", ["auto", "ax_first", "xw_first"])
@pytest.mark.parametrize("widths", [(6, [24, 12]), (40, [12, 24])], ids=["f_in<f_out", "f_in>f_out"])
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_outputs_and_gradients_match_plain_autograd(arch, widths, order):
    torch.manual_seed(0)
    f_in, hidden = widths
    multilabel = arch == "gat"  # exercise the BCE path on one model
    batch = to_double(make_batch(n=60, f_in=f_in, classes=5, multilabel=multilabel))
    cfg = ModelConfig(hidden=hidden, dropout=0.0, order=order, **ARCHS[arch])
    model = build_model(cfg, f_in, 5, multilabel).double().train()
    x = batch.x.requires_grad_(True)

    out = model.classify(model.embed(batch, x=x))
    grads = torch.autograd.grad(model.loss(out, batch), [x, *model.parameters()])

    ref_out = naive_forward(model, batch, x)
    ref_loss = weighted_loss(ref_out, batch.labels, batch.loss_weights, multilabel)
    ref_grads = torch.autograd.grad(ref_loss, [x, *model.parameters()])

    torch.testing.assert_close(out, ref_out, rtol=1e-9, atol=1e-10)
    names = ["x", *(n for n, _ in model.named_parameters())]
    for name, got, want in zip(names, grads, ref_grads):
        torch.testing.assert_close(
            got, want, rtol=1e-8, atol=1e-10, msg=lambda m, name=name: f"{arch}/{order} d{name}: {m}"
        )


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_first_layer_without_input_gradient_matches(arch):
    """The first layer skips dX (features need no gradient); dW must still be exact."""
    torch.manual_seed(1)
    batch = to_double(make_batch(n=50, f_in=30, classes=4, multilabel=False, seed=3))
    model = build_model(ModelConfig(hidden=[12], dropout=0.0, **ARCHS[arch]), 30, 4, False).double()
    grads = torch.autograd.grad(model.loss(model(batch), batch), list(model.parameters()))
    ref = torch.autograd.grad(
        weighted_loss(naive_forward(model, batch, batch.x), batch.labels, batch.loss_weights, False),
        list(model.parameters()),
    )
    for got, want in zip(grads, ref):
        torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)


def test_float32_forced_orders_agree():
    """The two fixed orders and the scheduled one give the same float32 results within rounding."""
    batch = make_batch(n=200, f_in=64, classes=6, multilabel=False, seed=5)
    results = []
    for order in ("auto", "ax_first", "xw_first"):
        torch.manual_seed(7)
        model = build_model(
            ModelConfig(arch="sage", hidden=[128, 32], dropout=0.0, order=order), 64, 6, False
        )
        loss = model.loss(model(batch), batch)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    for loss, grads in results[1:]:
        torch.testing.assert_close(loss, results[0][0], rtol=1e-5, atol=1e-6)
        for got, want in zip(grads, results[0][1]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
