"""The trainer's Adam steps as torch.optim.Adam does, bit for bit, keeps its state layout, and never imports the
compiler's front end (torch._dynamo) that torch.optim.Adam costs a trainer at start-up."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from saintpipe.trainer.adam import Adam
from saintpipe.trainer.batch import batch_from_subgraph
from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.models import build_model
from saintpipe.trainer.synthetic import random_subgraph


def _model_and_batches(arch: str, steps: int, device: str = "cpu"):
    sub = random_subgraph(120, 4.0, seed=3)
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, 120)
    batches = [batch_from_subgraph(sub, rng.normal(size=(120, 16)).astype(np.float32), labels, np.ones(120, bool),
                                   np.diff(sub.indptr) + 1, device=device) for _ in range(steps)]
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch=arch, hidden=[32, 16], dropout=0.0, heads=2, mixhop_powers=[0, 1]),
                        16, 4, multilabel=False)
    return model.to(device), batches


def _train(model, optimizer, batches) -> list[torch.Tensor]:
    for batch in batches:
        model.zero_grad(set_to_none=False)
        model.loss(model(batch), batch).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("arch,weight_decay", [("sage", 0.0), ("gat", 5e-4), ("mixhop", 1e-3)])
def test_steps_equal_torch_adam_bit_for_bit(arch, weight_decay):
    ours, batches = _model_and_batches(arch, 6)
    theirs, _ = _model_and_batches(arch, 6)
    got = _train(ours, Adam(ours.parameters(), lr=0.01, weight_decay=weight_decay), batches)
    want = _train(theirs, torch.optim.Adam(theirs.parameters(), lr=0.01, weight_decay=weight_decay), batches)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_too_it_steps_as_torch_adam():
    # On CUDA both take torch's for-each kernels (its default there), the step counts staying on the CPU.
    ours, batches = _model_and_batches("sage", 6, "cuda")
    theirs, _ = _model_and_batches("sage", 6, "cuda")
    got = _train(ours, Adam(ours.parameters(), lr=0.01, weight_decay=5e-4), batches)
    want = _train(theirs, torch.optim.Adam(theirs.parameters(), lr=0.01, weight_decay=5e-4), batches)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_state_moves_between_the_two_and_training_goes_on_equal():
    ours, batches = _model_and_batches("sage", 6)
    theirs, _ = _model_and_batches("sage", 6)
    torch_adam = torch.optim.Adam(theirs.parameters(), lr=0.02, weight_decay=1e-4)
    _train(theirs, torch_adam, batches[:3])
    ours.load_state_dict(theirs.state_dict())
    adam = Adam(ours.parameters(), lr=0.5)  # the loaded state's hyperparameters win, as with torch's
    adam.load_state_dict(torch_adam.state_dict())
    assert (adam.lr, adam.weight_decay) == (0.02, 1e-4)
    for g, w in zip(_train(ours, adam, batches[3:]), _train(theirs, torch_adam, batches[3:])):
        assert torch.equal(g, w)
    # ... and back: torch's Adam takes ours, whose layout is its own.
    saved = adam.state_dict()
    assert saved["param_groups"][0]["params"] == list(range(len(list(ours.parameters()))))
    assert set(saved["state"][0]) == {"step", "exp_avg", "exp_avg_sq"} and float(saved["state"][0]["step"]) == 6.0
    other = torch.optim.Adam(theirs.parameters(), lr=0.5)
    other.load_state_dict(saved)
    assert other.param_groups[0]["lr"] == 0.02


def test_a_state_of_another_model_is_refused():
    model, _ = _model_and_batches("sage", 1)
    small = torch.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="for 2 parameters; this model has"):
        Adam(model.parameters(), lr=0.01).load_state_dict(Adam(small.parameters(), lr=0.01).state_dict())
    adam = Adam(small.parameters(), lr=0.01)
    small(torch.ones(1, 3)).sum().backward()
    adam.step()
    saved = adam.state_dict()
    saved["state"][7] = saved["state"].pop(1)
    with pytest.raises(ValueError, match="an entry for 7, none of its parameters"):
        Adam(small.parameters(), lr=0.01).load_state_dict(saved)


def test_parameters_without_a_gradient_are_left_alone():
    layer, unused = torch.nn.Linear(3, 2), torch.nn.Parameter(torch.ones(2))
    adam = Adam([*layer.parameters(), unused], lr=0.1)
    layer(torch.ones(1, 3)).sum().backward()
    adam.step()
    assert torch.equal(unused, torch.ones(2)) and set(adam.state) == {0, 1}


def test_a_training_step_does_not_import_torch_dynamo():
    code = ("import sys, torch\n"
            "from saintpipe.trainer.adam import Adam\n"
            "m = torch.nn.Linear(4, 2); a = Adam(m.parameters(), lr=0.1)\n"
            "m(torch.ones(3, 4)).sum().backward(); a.step(); m.zero_grad(set_to_none=False)\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
