"""The supervisor's record of one worker index: its counts across incarnations and its failures.

Pure bookkeeping (no Ray), so the rules are unit-tested on their own:

* counts: a worker reports counts since its process started; when the pid
  changes, what the old process had reported is kept (``retired``) and the
  new one adds to it, so the exported counters never go back.
* failures: a ``run`` that raised, or whose process died, is one restart.
  While Ray brings a dead process back, calls fail as "unavailable"; those
  are retries of the same restart, not new ones, until a report from a new
  pid shows the worker is back. Retries after an exception back off
  exponentially; ``max_consecutive`` failures without a single pushed
  subgraph in between mean the worker cannot work (a bad config, a broken
  dataset), and the service reports that instead of restarting forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from saintpipe.services.sampler_service.counters import WorkerCounters

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 30.0
RESTART_POLL_S = 0.2


@dataclass
class WorkerSlot:
    """One worker index: its current actor handle, run reference, counts and failures."""

    index: int
    worker: Any = None  # the SamplerWorker facade
    run_ref: Any = None  # the running run() call; None while waiting to retry
    retry_at: float = 0.0  # monotonic time of the next run() attempt
    pid: int | None = None
    retired: WorkerCounters = field(default_factory=WorkerCounters)  # earlier incarnations' counts
    current: WorkerCounters = field(default_factory=WorkerCounters)
    restarts: int = 0
    consecutive_failures: int = 0
    restarting: bool = False  # a death was counted; waiting for a report from the new process
    last_error: str = ""
    host: str = ""  # where the incarnation ``placed_pid`` runs (hostname) ...
    node_id: str = ""  # ... and its Ray node
    placed_pid: int | None = None

    @property
    def placement_stale(self) -> bool:
        """A new incarnation reported counts but where it runs is not known yet (not asked while Ray is still
        restarting the process: the question would wait for it)."""
        return (self.worker is not None and self.pid is not None and self.pid != self.placed_pid
                and not self.restarting)

    @property
    def total(self) -> WorkerCounters:
        return self.retired.add(self.current)

    def observe_counters(self, pid: int, counters: WorkerCounters) -> None:
        """Take a worker's report; a new pid means a new incarnation counting from zero."""
        if self.pid is not None and pid != self.pid:
            self.retired = self.retired.add(self.current)
            self.current = WorkerCounters()
        if pid != self.pid:
            self.restarting = False
        if counters.subgraphs > self.current.subgraphs:
            self.consecutive_failures = 0  # it works again
        self.pid, self.current = pid, counters

    def record_failure(self, reason: str, kind: str, now: float) -> bool:
        """Take a failed run; return whether it counts as a new restart. Sets ``retry_at``.

        Args:
            reason: what happened, for logs and the final error.
            kind: ``"exception"`` (run raised; the process lives), ``"unavailable"``
                (the process died or is being restarted by Ray) or ``"died"`` (Ray gave
                up on the actor; the caller replaces it).
            now: the current monotonic time.
        """
        self.run_ref = None
        self.last_error = reason
        if kind != "exception":
            # The process is gone: the next one may run elsewhere, under a pid the old one had on another host.
            self.placed_pid = None
        if kind == "unavailable" and self.restarting:
            self.retry_at = now + RESTART_POLL_S  # the same death: Ray is still bringing it back
            return False
        self.restarts += 1
        self.consecutive_failures += 1
        self.restarting = kind == "unavailable"
        self.retry_at = now + (min(BACKOFF_FIRST_S * 2 ** (self.consecutive_failures - 1), BACKOFF_MAX_S)
                               if kind == "exception" else RESTART_POLL_S)
        return True


def process_of(index: int, per_process: int) -> int:
    """The process that hosts worker ``index`` when ``per_process`` workers share one: workers [g*k, g*k + k)
    live in process g, so the lowest indices fill a process before the next starts, and removing the highest
    ones empties the last process first."""
    if per_process < 1:
        raise ValueError(f"per_process must be >= 1, got {per_process}")
    return index // per_process


def split_range(total: int, parts: int) -> list[tuple[int, int]]:
    """Split [0, total) into ``parts`` contiguous [start, stop) ranges of near-equal size (the workers' shares
    of the normalization's pre-sampling)."""
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    bounds = [total * k // parts for k in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))
