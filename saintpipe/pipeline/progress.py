"""The console view of a run: one bar per epoch with subgraphs/s, loss and validation score, and a bar of
its own while the trainer scores the full graph (which pass, how far).

On a terminal each epoch is a tqdm bar redrawn in place. When stderr is not a terminal (CI, ``| tee``, compose
logs) the same figures come as plain lines: one when each epoch ends and, in a long epoch, one every
``line_interval`` seconds (:class:`saintpipe.core.bars.ProgressBar`), never a carriage return.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from saintpipe.core.bars import LINE_INTERVAL_S, ProgressBar
from saintpipe.trainer.progress import TrainerProgress


EVAL_BAR_AFTER_S = 2.0
"""An evaluation gets a bar once it has run this long."""


def _fmt(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.4f}"


class EpochBars:
    """Renders :class:`TrainerProgress` updates as one bar per epoch.

    Args:
        epochs: the epoch budget (bars are labelled ``epoch k/epochs``).
        enabled: False renders nothing (``[run] progress = false``).
        file: the stream (stderr by default); bars on a terminal, lines elsewhere.
        line_interval: seconds between two lines within an epoch when ``file`` is not a terminal.
    """

    def __init__(self, epochs: int, enabled: bool = True, file: TextIO | None = None,
                 line_interval: float = LINE_INTERVAL_S) -> None:
        self.epochs = epochs
        self.enabled = enabled
        self.file = file or sys.stderr
        self.line_interval = line_interval
        self._bar: ProgressBar | None = None
        self._eval_bar: ProgressBar | None = None
        self._epoch = -1
        self._mark = (time.monotonic(), 0)  # (time, subgraphs) at the start of the rate window
        self._rate = math.nan

    def _open(self, epoch: int) -> None:
        self._close()
        self._epoch = epoch
        if self.enabled:
            self._bar = self._new_bar(f"epoch {epoch + 1}/{self.epochs}")

    def _new_bar(self, desc: str) -> ProgressBar:
        return ProgressBar(total=100, desc=desc, file=self.file, leave=True, dynamic_ncols=False, ncols=100,
                           bar_format="{desc} {percentage:3.0f}%|{bar:24}| {elapsed}{postfix}", mininterval=0.2,
                           line_interval=self.line_interval)

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def update(self, p: TrainerProgress) -> None:
        """Show ``p``: finish the bars of completed epochs and move the current one."""
        now = time.monotonic()
        t0, n0 = self._mark
        if now - t0 >= 1.0 and p.subgraphs > n0:
            self._rate = (p.subgraphs - n0) / (now - t0)
            self._mark = (now, p.subgraphs)
        if self._epoch < 0:
            self._open(min(p.epoch, max(0, self.epochs - 1)))
        while self._epoch < p.epoch and self._epoch < self.epochs - 1:
            self._set(100.0, p)  # the epoch just completed ends full, with the score it was validated at
            self._open(self._epoch + 1)
        if p.epoch >= self.epochs or p.done and p.epoch > self._epoch:
            self._set(100.0, p)
        else:
            self._set(100.0 * p.epoch_fraction, p)
        self._evaluation(p)

    def _evaluation(self, p: TrainerProgress) -> None:
        """The evaluation bar: opened once a full-graph evaluation has run for ``EVAL_BAR_AFTER_S`` (a short
        one, as on small graphs after every epoch, would only add a line each time), closed when it ends."""
        if not self.enabled or (self._eval_bar is None and p.evaluation_s < EVAL_BAR_AFTER_S):
            return
        if not p.evaluating:
            if self._eval_bar is not None:
                self._eval_bar.close()
                self._eval_bar = None
            return
        if self._eval_bar is None:
            self._eval_bar = self._new_bar("evaluation (full graph)")
        self._eval_bar.n = round(100.0 * min(1.0, max(0.0, p.evaluation_fraction)), 1)
        self._eval_bar.set_postfix_str(p.evaluation or "starting", refresh=False)
        self._eval_bar.refresh()

    def _set(self, percent: float, p: TrainerProgress) -> None:
        if self._bar is None:
            return
        self._bar.n = round(min(100.0, max(0.0, percent)), 1)
        rate = "-" if math.isnan(self._rate) else f"{self._rate:.1f}"
        self._bar.set_postfix_str(f"{rate} subgraphs/s, loss {_fmt(p.loss)}, val {_fmt(p.val_score)}",
                                  refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        self._close()
        self._evaluation(TrainerProgress())
