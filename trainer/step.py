"""One optimizer step on a batch, and the early-stopping bookkeeping around validation.

:class:`TrainState` owns the model and its optimizer (:class:`~saintpipe.trainer.adam.Adam`); :meth:`TrainState.step`
runs forward, backward, an optional gradient all-reduce (data-parallel
trainers) and the optimizer. :class:`EarlyStopping` keeps the best validation
score, the weights that reached it and the patience counter; both are plain
state that a checkpoint saves and restores.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import cast
from dataclasses import dataclass, field

import torch

from saintpipe.trainer.adam import Adam
from saintpipe.trainer.batch import GraphBatch
from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.models import GNN, build_model

GradSync = Callable[[list[torch.Tensor], float], float]
"""Averages the gradients across data-parallel trainers in place; gets and returns a number to sum too."""


class TrainState:
    """A model, its optimizer and the step counter.

    Args:
        config: the model configuration (learning rate and weight decay included).
        in_dim, num_classes, multilabel: the data's shape.
        device: where the model lives.
        seed: seeds the weight initialization (every data-parallel trainer must use the same).
    """

    def __init__(
        self,
        config: ModelConfig,
        in_dim: int,
        num_classes: int,
        multilabel: bool,
        device: torch.device | str = "cpu",
        seed: int = 0,
    ) -> None:
        torch.manual_seed(seed)
        self.device = torch.device(device)
        self.model: GNN = build_model(config, in_dim, num_classes, multilabel).to(self.device)
        self.optimizer = Adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.steps = 0

    def step(
        self, batch: GraphBatch, sync: GradSync | None = None, labelled: float = 0.0
    ) -> tuple[float, float]:
        """Forward, backward, (all-reduce,) optimizer step on ``batch``.

        Args:
            batch: the subgraph batch (on this state's device).
            sync: averages gradients across trainers; None for a single trainer.
            labelled: a number summed across trainers along with the gradients
                (the labelled nodes of this step, for the shared epoch count).

        Returns:
            (this trainer's loss, ``labelled`` summed over all trainers).
        """
        self.model.train()
        self.model.zero_grad(set_to_none=False)
        loss = self.model.loss(self.model(batch), batch)
        loss.backward()
        if sync is not None:
            # Every parameter has its gradient after backward (the loss reaches them all).
            labelled = sync(cast(list[torch.Tensor], [p.grad for p in self.model.parameters()]), labelled)
        self.optimizer.step()
        self.steps += 1
        return float(loss.detach()), labelled

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "steps": self.steps,
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])


@dataclass
class EarlyStopping:
    """Best validation score so far, the weights that reached it, and patience.

    Attributes:
        patience: validations without improvement before stopping (0: never stop).
        min_delta: improvements smaller than this do not count.
    """

    patience: int
    min_delta: float = 0.0
    best: float = -math.inf
    best_step: int = -1
    best_state: dict | None = None
    bad_rounds: int = 0
    history: list[tuple[int, float]] = field(default_factory=list)

    def update(self, score: float, step: int, model: torch.nn.Module) -> bool:
        """Record a validation score; returns True when training should stop."""
        self.history.append((step, score))
        if score > self.best + self.min_delta or self.best_state is None:
            self.best, self.best_step, self.bad_rounds = score, step, 0
            self.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
            return False
        self.bad_rounds += 1
        return self.patience > 0 and self.bad_rounds >= self.patience

    def state_dict(self) -> dict:
        return {
            "best": self.best,
            "best_step": self.best_step,
            "best_state": self.best_state,
            "bad_rounds": self.bad_rounds,
            "history": list(self.history),
        }

    def load_state_dict(self, state: dict) -> None:
        self.best, self.best_step = float(state["best"]), int(state["best_step"])
        self.best_state, self.bad_rounds = state["best_state"], int(state["bad_rounds"])
        self.history = [tuple(h) for h in state["history"]]
