"""Tensor helpers shared by the minibatch path and the models: arrays into tensors, and the GraphSAINT loss.

Both the users' minibatches (:mod:`saintpipe.minibatch.batch`) and the trainer's batches and models
(:mod:`saintpipe.trainer`) build on these, so neither reaches into the other.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike
import torch
from torch import nn


def as_tensor(array: np.ndarray, dtype: DTypeLike) -> torch.Tensor:
    """A CPU tensor over ``array`` (converted to ``dtype``), copying only when it must.

    Arrays decoded from the pool are read-only views of the message; torch
    cannot wrap those, so they are copied once.
    """
    out = np.ascontiguousarray(array, dtype=dtype)
    if not out.flags.writeable:
        out = out.copy()
    return torch.from_numpy(out)


def weighted_loss(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, multilabel: bool
) -> torch.Tensor:
    """Per-node CE (softmax) or BCE (sigmoid, mean over classes), weighted by ``weights``.

    The sum is divided by Σ weights rather than by a constant, so the step size
    does not depend on how many labelled nodes a subgraph happens to hold.
    """
    if multilabel:
        per_node = nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="none").mean(1)
    else:
        per_node = nn.functional.cross_entropy(logits, labels.clamp(min=0), reduction="none")
    total = weights.sum()
    if float(total) <= 0.0:
        return (logits * 0.0).sum()  # no labelled node in this batch: a zero loss that still has a graph
    return (weights * per_node).sum() / total
