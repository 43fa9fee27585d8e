"""Acknowledgements made with ``ack(wait=False)``, waiting to travel with the pool object's next round trip."""

from __future__ import annotations

import threading
import time

from saintpipe.services.pool.keys import FORKS, log


class AckQueue:
    """The entry ids queued for acknowledgement, shared by every round trip of one pool object.

    Whoever takes ids sends them in its own round trip and, if that fails,
    puts them back (acknowledging twice is harmless; losing one is not).
    """

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self._ids: list[str] = []
        self._since = 0.0  # when the oldest queued id was queued
        self._lock = threading.Lock()
        self._flusher: int | None = None  # the fork generation whose flush thread runs

    def push(self, entry_id: str) -> bool:
        """Queue ``entry_id``; True when this process has no flush thread yet: the caller starts one."""
        with self._lock:
            if not self._ids:
                self._since = time.monotonic()
            self._ids.append(entry_id)
            if self._flusher != FORKS[0]:  # none yet, or we are a forked child (threads do not survive)
                self._flusher = FORKS[0]
                return True
        return False

    def take(self) -> list[str]:
        with self._lock:
            ids, self._ids = self._ids, []
        return ids

    def requeue(self, ids: list[str]) -> None:
        if ids:
            with self._lock:
                if not self._ids:
                    self._since = time.monotonic()
                self._ids[:0] = ids

    def queued(self) -> bool:
        with self._lock:
            return bool(self._ids)

    def due(self, delay: float) -> bool:
        """Whether ids have waited ``delay`` seconds without a round trip carrying them."""
        with self._lock:
            return bool(self._ids) and time.monotonic() - self._since >= delay

    def note_stale(self, stale: int, sent: int) -> None:
        log.debug("pool job %s: %d of %d queued acknowledgements found their entry not pending",
                  self.job_id, stale, sent)
