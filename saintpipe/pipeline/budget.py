"""How ``[run] max_seconds`` is split between start-up, training, the final evaluation and stopping.

The limit bounds the whole ``saintpipe run`` a user waits for, from the command's start. Start-up takes what
it takes. Training then goes on until the time left is what the final full-graph evaluation needs (the
trainer's estimate with a safety factor, see :data:`EVALUATION_SAFETY`) plus the time to stop every component;
the evaluation is cut if it runs past its own deadline, and the run still reports what the trainer did. All
times here are ``time.monotonic()`` seconds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

EVALUATION_SAFETY = 1.25
"""The final evaluation is given this many times its estimate (a validation's measured time, or a timed probe)."""


@dataclass(frozen=True)
class RunBudget:
    """The deadlines of a run with ``limit_s`` seconds, started at ``started`` (``time.monotonic()``).

    Example:
        >>> b = RunBudget(limit_s=100.0, started=0.0)
        >>> b.deadline, b.evaluation_cut, b.training_end(evaluation_s=20.0)
        (100.0, 90.0, 65.0)
    """

    limit_s: float
    started: float

    @property
    def stop_margin_s(self) -> float:
        """Kept back for the last step, stopping the components and the summary: 10 % of the limit, within
        4 to 15 s (stopping Ray, the shards and Redis took 3 to 4 s on the 2-core machine)."""
        return min(15.0, max(4.0, 0.1 * self.limit_s))

    @property
    def deadline(self) -> float:
        return self.started + self.limit_s

    @property
    def evaluation_cut(self) -> float:
        """An evaluation still running then is cut (it gives no scores)."""
        return self.deadline - self.stop_margin_s

    def training_end(self, evaluation_s: float) -> float:
        """When training must end so that an evaluation of ``evaluation_s`` seconds (NaN: unknown, 0) fits."""
        reserve = 0.0 if math.isnan(evaluation_s) else EVALUATION_SAFETY * max(0.0, evaluation_s)
        return self.evaluation_cut - reserve

    @staticmethod
    def to_wall(t: float) -> float:
        """``time.monotonic()`` seconds as ``time.time()`` seconds (what another process can compare with)."""
        return time.time() + (t - time.monotonic())

    def describe(self, startup_s: float, training_end: float, evaluation_s: float, needed: bool = True) -> str:
        """One line for the summary: how the limit was split (``needed``: the final evaluation takes a pass)."""
        estimate = "no estimate" if math.isnan(evaluation_s) else f"estimated {evaluation_s:.2g} s"
        final = (f"then the final evaluation ({estimate}; cut at {self.evaluation_cut - self.started:.1f} s)" if needed
                 else "no final pass (the best validation scored the test split)")
        return (f"{self.limit_s:g} s: start-up {startup_s:.1f} s, training until {training_end - self.started:.1f} s, "
                f"{final}, {self.stop_margin_s:.1f} s to stop")
