"""The trainer's dropout: torch.nn.Dropout's law (keep with 1 - p, scale 1 / (1 - p)) from a cheaper mask."""

from __future__ import annotations

import pytest
import torch

from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.dropout import Dropout, dropout
from saintpipe.trainer.models import build_model


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keeps_each_element_with_probability_one_minus_p_and_scales_the_kept(p: float) -> None:
    torch.manual_seed(0)
    x = torch.ones(400, 500)
    y = dropout(x, p)
    kept = y != 0
    rate = kept.float().mean().item()
    # 200,000 Bernoulli draws: the standard error of the rate is below 0.0012
    assert abs(rate - (1 - p)) < 0.006
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    assert abs(y.mean().item() - 1.0) < 0.06  # unbiased: E[y] = x


def test_the_gradient_passes_through_the_kept_elements_only() -> None:
    torch.manual_seed(1)
    x = torch.randn(64, 32, requires_grad=True)
    y = dropout(x, 0.3)
    y.sum().backward()
    assert x.grad is not None
    expected = (y.detach() != 0).float() / 0.7
    assert torch.allclose(x.grad, expected)


def test_identity_when_not_training_or_p_is_zero() -> None:
    x = torch.randn(10, 4)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    module = Dropout(0.5).eval()
    assert module(x) is x


def test_same_seed_same_mask() -> None:
    x = torch.ones(50, 50)
    torch.manual_seed(7)
    a = dropout(x, 0.4)
    torch.manual_seed(7)
    b = dropout(x, 0.4)
    assert torch.equal(a, b)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_probability_out_of_range_is_refused(p: float) -> None:
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(p)


def test_the_models_use_it_and_keep_their_state_dict_keys() -> None:
    model = build_model(ModelConfig(arch="sage", hidden=[16, 16], dropout=0.2), 8, 3, multilabel=False)
    assert isinstance(model.dropout, Dropout) and model.dropout.p == 0.2
    assert not any("dropout" in key for key in model.state_dict())
