"""Adam for the trainer: torch's own update, without ``torch.optim.Optimizer`` around it.

``torch.optim.Adam`` imports ``torch._dynamo``, the compiler's front end, in its constructor
(``add_param_group`` is wrapped in ``torch._disable_dynamo``) and again in every ``step``
(``_use_grad_for_differentiable``). The trainer never compiles, yet that import took 1.0-1.4 s of CPU on the
2-core reference machine, between the trainer's start and its first step (docs/benchmarks/startup.md).

:class:`Adam` keeps the per-parameter state itself and calls :func:`torch.optim.adam.adam`, the function
``torch.optim.Adam.step`` calls, with the same arguments for the options used here (no AMSGrad, no
capturable or fused variants, torch's default choice of the for-each kernels). So its weights after each step
are ``torch.optim.Adam``'s bit for bit (a unit test compares them). Its :meth:`state_dict` has
``torch.optim.Adam``'s layout, so that checkpoints load either way. Gradients are cleared by the model's own
``torch.nn.Module.zero_grad``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch.optim.adam import adam as adam_update

BETAS = (0.9, 0.999)
EPS = 1e-8


def _scalar_dtype() -> torch.dtype:
    # torch.optim keeps each parameter's step count in the default float type, on the CPU.
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


class Adam:
    """Adam (Kingma & Ba) with L2 weight decay added to the gradient, as ``torch.optim.Adam(params, lr=...,
    weight_decay=...)``.

    Args:
        params: the parameters to optimize (their order is the state dict's numbering).
        lr: the learning rate. weight_decay: the L2 penalty's factor.
    """

    def __init__(self, params: Iterable[torch.Tensor], lr: float, weight_decay: float = 0.0) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got an empty parameter list")
        self.lr, self.weight_decay = float(lr), float(weight_decay)
        self.betas, self.eps = BETAS, EPS
        self.state: dict[int, dict[str, torch.Tensor]] = {}  # parameter index -> step, exp_avg, exp_avg_sq

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        has_complex = False
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("Adam does not support sparse gradients")
            has_complex |= torch.is_complex(p)
            state = self.state.get(i)
            if state is None:
                state = self.state[i] = {
                    "step": torch.tensor(0.0, dtype=_scalar_dtype()),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
            params.append(p)
            grads.append(p.grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])
        beta1, beta2 = self.betas
        adam_update(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, has_complex=has_complex,
                    beta1=beta1, beta2=beta2, lr=self.lr, weight_decay=self.weight_decay, eps=self.eps,
                    maximize=False, foreach=None, capturable=False, differentiable=False, fused=None,
                    grad_scale=None, found_inf=None, decoupled_weight_decay=False)

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Adam.state_dict()``'s layout: the state by parameter index, and one parameter group."""
        group = {"lr": self.lr, "betas": self.betas, "eps": self.eps, "weight_decay": self.weight_decay,
                 "amsgrad": False, "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                 "fused": None, "decoupled_weight_decay": False, "params": list(range(len(self.params)))}
        return {"state": {i: dict(s) for i, s in self.state.items()}, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take a state saved by :meth:`state_dict` or by ``torch.optim.Adam``: its moments (on each parameter's
        device and in its type), its step counts and, as torch does, its hyperparameters.

        Raises:
            ValueError: the saved state is of another number of parameters, of several parameter groups, or
                has an entry for none of them.
        """
        groups = state_dict["param_groups"]
        if len(groups) != 1:
            raise ValueError(f"the optimizer state has {len(groups)} parameter groups; this trainer's has 1")
        saved = list(groups[0]["params"])
        if len(saved) != len(self.params):
            raise ValueError(f"the optimizer state is for {len(saved)} parameters; this model has "
                             f"{len(self.params)}")
        position = {key: i for i, key in enumerate(saved)}
        state: dict[int, dict[str, torch.Tensor]] = {}
        for key, values in state_dict["state"].items():
            if key not in position:
                raise ValueError(f"the optimizer state has an entry for {key!r}, none of its parameters")
            p = self.params[position[key]]
            state[position[key]] = {
                name: value.clone() if name == "step"
                else value.to(dtype=p.dtype if p.is_floating_point() else value.dtype, device=p.device, copy=True)
                for name, value in values.items()}
        self.state = state
        group = groups[0]
        self.lr, self.weight_decay, self.eps = float(group["lr"]), float(group["weight_decay"]), float(group["eps"])
        self.betas = (float(group["betas"][0]), float(group["betas"][1]))
