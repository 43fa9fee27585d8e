"""Every optimizer step's loss, and the loss-spike ratio read from them.

:class:`StepLosses` records each step's training loss and the epoch it belonged
to in growing numpy arrays (a run can have 100k steps: appending is amortised
O(1) and costs no Python object per step once converted back).

:func:`loss_spike` measures how far the worst step strays from a typical one:
the largest step loss divided by the median step loss, over the steps after the
warm-up: the first epoch, and at least the first 5 % of the steps (the first
losses fall from their initial value by design, so they would measure learning,
not instability). The 5 % matters where epochs are short: on Cora an epoch is
2 to 3 subgraphs (140 training nodes, 50-80 per subgraph), so "after the first
epoch" alone starts at step 3, where the loss is still about ln(7), and the
ratio would be the initial loss over the trained one, whatever the sampler
does. On the demo dataset (11 subgraphs an epoch) both rules agree within a
few steps. A step whose loss is NaN or
infinite is not ignored: it makes the ratio infinite, because a diverged step
is the worst spike there is and hiding it would report a stable run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LossSpike:
    """The loss-spike figures of a run.

    Attributes:
        ratio: largest / median step loss (NaN: no step after ``after_epoch``; inf: a non-finite step loss,
            or a zero median under a positive largest loss).
        largest, median: the step losses it is made of (NaN when there are no steps).
        steps: steps counted (those after ``after_epoch``). non_finite: how many of them had a NaN or
            infinite loss.
    """

    ratio: float
    largest: float
    median: float
    steps: int
    non_finite: int = 0


# The warm-up is at least this share of a run's steps (module docstring).
WARMUP_FRACTION = 0.05


def loss_spike(losses: Sequence[float] | np.ndarray, epochs: Sequence[int] | np.ndarray,
               after_epoch: int = 1, warmup_fraction: float = WARMUP_FRACTION) -> LossSpike:
    """The loss-spike figures of the steps after the warm-up.

    Args:
        losses: every step's loss, in order.
        epochs: the epoch index (0-based) each step belonged to, same length.
        after_epoch: steps of epochs before this one are left out (1: skip the first epoch).
        warmup_fraction: also leave out the first ``floor(fraction * steps)`` steps (0: epochs only).

    Raises:
        ValueError: ``losses`` and ``epochs`` differ in length.
    """
    loss = np.asarray(losses, dtype=np.float64)
    epoch = np.asarray(epochs, dtype=np.int64)
    if loss.shape != epoch.shape:
        raise ValueError(f"{loss.size} step losses but {epoch.size} step epochs")
    first = int(np.searchsorted(epoch >= after_epoch, True)) if np.all(np.diff(epoch) >= 0) else None
    if first is None:  # epochs out of order (never written so): keep the plain epoch filter
        kept = loss[epoch >= after_epoch]
    else:
        kept = loss[max(first, int(warmup_fraction * loss.size)):]
    if kept.size == 0:
        return LossSpike(math.nan, math.nan, math.nan, 0)
    finite = np.isfinite(kept)
    non_finite = int(kept.size - finite.sum())
    if non_finite:
        median = float(np.median(kept[finite])) if non_finite < kept.size else math.nan
        return LossSpike(math.inf, math.inf, median, int(kept.size), non_finite)
    largest, median = float(kept.max()), float(np.median(kept))
    if median > 0:
        ratio = largest / median
    else:  # losses are >= 0: a zero median with a positive step is an unbounded spike, all zeros none
        ratio = math.inf if largest > 0 else 1.0
    return LossSpike(ratio, largest, median, int(kept.size))


def loss_spike_ratio(losses: Sequence[float] | np.ndarray, epochs: Sequence[int] | np.ndarray,
                     after_epoch: int = 1, warmup_fraction: float = WARMUP_FRACTION) -> float:
    """Largest step loss / median step loss after the warm-up (see :func:`loss_spike`)."""
    return loss_spike(losses, epochs, after_epoch, warmup_fraction).ratio


class StepLosses:
    """Every step's loss and epoch index, appended in order into arrays that double when full.

    Args:
        capacity: initial room (grows as needed).
    """

    def __init__(self, capacity: int = 1024) -> None:
        self._loss = np.empty(max(1, capacity), np.float64)
        self._epoch = np.empty(max(1, capacity), np.int32)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, loss: float, epoch: int) -> None:
        """Record one step's loss and the (0-based) epoch it belonged to."""
        if self._n == self._loss.size:
            self._loss = np.concatenate([self._loss, np.empty_like(self._loss)])
            self._epoch = np.concatenate([self._epoch, np.empty_like(self._epoch)])
        self._loss[self._n] = loss
        self._epoch[self._n] = epoch
        self._n += 1

    @property
    def losses(self) -> np.ndarray:
        """The recorded losses (a view: copy before keeping it past the next append)."""
        return self._loss[: self._n]

    @property
    def epochs(self) -> np.ndarray:
        """The recorded epoch indices (a view)."""
        return self._epoch[: self._n]

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of the recorded arrays (``losses``, ``epochs``)."""
        return {"losses": self.losses.copy(), "epochs": self.epochs.copy()}

    def load_state_dict(self, state: dict) -> None:
        """Replace the record by ``state`` (arrays or sequences, as :meth:`state_dict` gives)."""
        losses, epochs = np.asarray(state["losses"], np.float64), np.asarray(state["epochs"], np.int32)
        if losses.shape != epochs.shape:
            raise ValueError(f"{len(losses)} step losses but {len(epochs)} step epochs")
        n = losses.size
        self._loss = np.empty(max(1024, 2 * n), np.float64)
        self._epoch = np.empty(self._loss.size, np.int32)
        self._loss[:n], self._epoch[:n] = losses, epochs
        self._n = n
