"""The supervisor's record of one worker index: its counts across incarnations and its failures.

Pure bookkeeping (no Ray), so the rules are unit-tested on their own:

* counts: a worker reports counts since its process started; when the pid
  changes, what the old process had reported is kept (``retired``) and the
  new one adds to it, so the exported counters never go back.
* failures: each failed ``run`` (process death or exception) is a restart;
  retries back off exponentially; ``max_consecutive`` failures without a
  single pushed subgraph in between mean the worker cannot work (a bad
  config, a broken dataset), and the service reports that instead of
  restarting forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.sampler_service.counters import WorkerCounters

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 30.0


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
    deaths_on_actor: int = 0  # process deaths of the current actor handle (against Ray's max_restarts)
    last_error: str = ""

    @property
    def total(self) -> WorkerCounters:
        return self.retired.add(self.current)

    def observe_counters(self, pid: int, counters: WorkerCounters) -> None:
        """Take a worker's report; a new pid means a new incarnation counting from zero."""
        if self.pid is not None and pid != self.pid:
            self.retired = self.retired.add(self.current)
            self.current = WorkerCounters()
        if counters.subgraphs > self.current.subgraphs:
            self.consecutive_failures = 0  # it works again
        self.pid, self.current = pid, counters

    def record_failure(self, reason: str, *, died: bool, now: float) -> float:
        """Count a failed run; return when to try again (monotonic time)."""
        self.restarts += 1
        self.consecutive_failures += 1
        self.deaths_on_actor += int(died)
        self.last_error = reason
        self.run_ref = None
        # A dead process is restarted by Ray already; an exception is retried after a growing pause.
        delay = 0.0 if died else min(BACKOFF_FIRST_S * 2 ** (self.consecutive_failures - 1), BACKOFF_MAX_S)
        self.retry_at = now + delay
        return self.retry_at
