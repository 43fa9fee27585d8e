"""Following a full-graph evaluation from another thread, and cutting it at a deadline.

Full-graph evaluation is the one part of a run whose length grows with the whole graph rather than with a
subgraph: at Kronecker scale 24 it is minutes. An :class:`EvalWatch` is what lets the runner show it (which
pass, how far) and bound it: the evaluation reports each row block to the watch, and the watch raises
:class:`EvaluationCancelled` at the first block past its deadline or after :meth:`EvalWatch.cancel`. Blocks
are small (``eval_batch_nodes`` rows, about 256 MiB), so a cut lands within a block's time.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass


class EvaluationCancelled(Exception):
    """An evaluation was cut before its end (the run's deadline, or a cancel); it has no scores."""


@dataclass(frozen=True)
class EvalStatus:
    """What an evaluation is doing: ``running``, its pass (``phase``), the fraction of all passes done, and
    for how long it has run (``elapsed_s``)."""

    running: bool = False
    phase: str = ""
    fraction: float = 0.0
    elapsed_s: float = 0.0


class EvalWatch:
    """Shared between the thread that evaluates and those that look at it.

    Args:
        deadline: ``time.time()`` past which the evaluation is cut (None: no limit); :meth:`cut_at` changes it.
    """

    def __init__(self, deadline: float | None = None) -> None:
        self._deadline = deadline
        self._cancel = threading.Event()
        self._status = EvalStatus()
        self._started = math.nan
        self._passes, self._pass, self._phase = 1, -1, ""  # begin() and next_pass() set them per evaluation
        self.last_seconds = math.nan  # the last evaluation that ran to its end, in seconds

    # --- the evaluating thread ----------------------------------------------------------------------------
    def begin(self, passes: int) -> None:
        """An evaluation of ``passes`` passes over the nodes starts (the cancel of an earlier one is forgotten)."""
        self._cancel.clear()
        self._passes, self._pass, self._phase = max(1, passes), -1, ""
        self._started = time.monotonic()
        self._status = EvalStatus(True, "", 0.0)
        self.check()

    def next_pass(self, phase: str) -> None:
        self._pass += 1
        self._phase = phase
        self.advance(0.0)

    def advance(self, within: float) -> None:
        """The current pass is ``within`` (0..1) done. Raises :class:`EvaluationCancelled` past the deadline."""
        done = (max(0, self._pass) + min(1.0, within)) / self._passes
        self._status = EvalStatus(True, self._phase, min(1.0, done))
        self.check()

    def end(self, completed: bool) -> None:
        if completed:
            self.last_seconds = time.monotonic() - self._started
        self._status = EvalStatus()

    def check(self) -> None:
        if self._cancel.is_set():
            raise EvaluationCancelled("evaluation cancelled")
        if self._deadline is not None and time.time() > self._deadline:
            raise EvaluationCancelled("evaluation cut at the run's deadline")

    # --- other threads ------------------------------------------------------------------------------------
    @property
    def status(self) -> EvalStatus:
        st = self._status
        if not st.running:
            return st
        return EvalStatus(True, st.phase, st.fraction, time.monotonic() - self._started)

    def cancel(self) -> None:
        """Cut the evaluation running now, if any, at its next block."""
        if self._status.running:
            self._cancel.set()

    def cut_at(self, deadline: float | None) -> None:
        """Cut every evaluation still running at ``deadline`` (``time.time()``; None: no limit)."""
        self._deadline = deadline
