"""Where a trainer's training stands, as its actor reports it to whoever follows the run."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class TrainerProgress:
    """Where training stands (summed over data-parallel trainers where that makes sense).

    Attributes:
        epoch: completed epochs. epoch_fraction: progress into the current one, in [0, 1).
        steps: optimizer steps. subgraphs: subgraphs trained on. loss: the last training loss.
        val_score: the last validation score (NaN before the first). done: training has ended.
        evaluating: a full-graph evaluation (a validation, or the final scoring) is running. evaluation: its
        current pass. evaluation_fraction: how much of it is done, in [0, 1]. evaluation_s: for how long.
        first_subgraph_at, first_step_at: when this run's first subgraph arrived and its first step was done
        (``time.time()``; NaN: not yet).
    """

    epoch: int = 0
    epoch_fraction: float = 0.0
    steps: int = 0
    subgraphs: int = 0
    loss: float = math.nan
    val_score: float = math.nan
    done: bool = False
    evaluating: bool = False
    evaluation: str = ""
    evaluation_fraction: float = 0.0
    evaluation_s: float = 0.0
    first_subgraph_at: float = math.nan
    first_step_at: float = math.nan
