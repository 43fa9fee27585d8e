"""How often a component may be restarted: a budget of restarts per sliding window, per component.

A run of hours meets faults that a restart cures (a preempted trainer, a shard process killed by the OOM
killer, a Redis that was restarted). A component that keeps failing is another matter: restarting it forever
hides the fault and burns the machine. So each component may be restarted at most ``max_restarts`` times
within any ``window_s`` seconds; the next failure inside the window ends the run.

Example::

    budget = RestartBudget(max_restarts=3, window_s=600)
    if budget.allow("feature shard 0", time.monotonic()):
        restart_it()
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class RestartEvent:
    """One restart: of what, why, and when (seconds since the run started)."""

    component: str
    reason: str
    at_s: float


class RestartBudget:
    """At most ``max_restarts`` restarts of one component within any ``window_s`` seconds.

    Args:
        max_restarts: restarts allowed per window (0: never restart).
        window_s: the sliding window, in seconds.
    """

    def __init__(self, max_restarts: int = 3, window_s: float = 600.0) -> None:
        if max_restarts < 0 or window_s <= 0:
            raise ValueError(f"max_restarts must be >= 0 and window_s > 0, got {max_restarts}, {window_s}")
        self.max_restarts = max_restarts
        self.window_s = window_s
        self._recent: dict[str, deque[float]] = {}

    def allow(self, component: str, now: float) -> bool:
        """Whether ``component`` may be restarted at time ``now``; if so, the restart is counted."""
        if self.left(component, now) == 0:
            return False
        self._recent[component].append(now)
        return True

    def left(self, component: str, now: float) -> int:
        """Restarts of ``component`` the window still allows at time ``now`` (none is counted)."""
        recent = self._recent.setdefault(component, deque())
        while recent and now - recent[0] >= self.window_s:
            recent.popleft()
        return max(0, self.max_restarts - len(recent))

    def used(self, component: str) -> int:
        """Restarts of ``component`` counted in its current window."""
        return len(self._recent.get(component, ()))

    def describe(self) -> str:
        """The policy in words, for messages."""
        return f"{self.max_restarts} restart(s) per {self.window_s:g} s"
