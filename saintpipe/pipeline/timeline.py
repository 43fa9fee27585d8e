"""When each part of a run became ready, in seconds since the command started.

A run's start-up is a handful of parts started at once or one after another (dataset, Redis, the feature
shards, Ray, the sampler workers, the trainers) and then the first subgraph and the first optimizer step.
:class:`Timeline` records each as it happens, counted from the process's own start (so the interpreter's
start-up and the imports count too); ``saintpipe run -v`` logs every entry as it comes, and the summary
carries them (``--json``: ``startup``) with the one figure users wait for: the first step.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)


# Set by a wrapper that execs the command after work of its own (./scripts/run.sh: its set-up and the kernels'
# warm-up), which the process's start time would otherwise count: when the command itself began.
STARTED_AT_ENV = "SAINTPIPE_STARTED_AT"


def process_started_at() -> float:
    """The wall-clock time (``time.time()``) this command started: ``$SAINTPIPE_STARTED_AT`` when a wrapper set
    it, else this process's start."""
    import os

    import psutil

    given = os.environ.get(STARTED_AT_ENV, "")
    try:
        return float(given)
    except ValueError:
        return psutil.Process().create_time()


class Timeline:
    """Named moments of a start-up, in seconds since ``origin`` (a ``time.time()``; default: this process's start).

    Thread-safe: parts started on threads mark their own moment.
    """

    def __init__(self, origin: float | None = None) -> None:
        self.origin = process_started_at() if origin is None else origin
        self._lock = threading.Lock()
        self.marks: dict[str, float] = {}

    def mark(self, part: str, at: float | None = None, detail: str = "") -> float:
        """Record that ``part`` became ready (now, or at the wall-clock time ``at``); the first mark of a part
        stands. Returns its seconds since the origin."""
        seconds = round((time.time() if at is None else at) - self.origin, 3)
        with self._lock:
            if part in self.marks:
                return self.marks[part]
            self.marks[part] = seconds
        log.info("start-up: %s ready at %.2f s%s", part, seconds, f" ({detail})" if detail else "")
        return seconds

    def __getstate__(self) -> dict:  # a loader travels to DataLoader workers with its timeline, not its lock
        return {"origin": self.origin, "marks": dict(self.marks)}

    def __setstate__(self, state: dict) -> None:
        self.origin, self.marks, self._lock = state["origin"], state["marks"], threading.Lock()
