"""Rate-limited logging of failed calls: one line per peer per interval, with a count of the rest.

A client that sends garbage (a fuzzer, a version mismatch, a bug in a loop)
must not be able to fill the server's log: every failed call is still answered
and counted in the metrics, but the log gets at most one line per interval per
peer host and kind of failure, and that line says how many were left out since
the previous one. Caller errors (INVALID_ARGUMENT and other typed errors) are
one line, no traceback; unexpected errors (INTERNAL) keep their traceback.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

import grpc

from saintpipe.core.errors import SaintpipeError
from saintpipe.core.grpc_status import one_line

log = logging.getLogger(__name__)


class RateLimiter:
    """Allows one event per key per ``interval_s``; counts the ones it holds back.

    Memory is bounded: at most ``max_keys`` keys are tracked, the least
    recently seen is forgotten first (with its count of held-back events: a
    forgotten key's next event is simply allowed). Thread-safe.

    Example::

        limiter = RateLimiter(10.0)
        held_back = limiter.allow(peer)
        if held_back is not None:
            log.warning("bad request from %s (%d more since the last line)", peer, held_back)
    """

    def __init__(
        self, interval_s: float, max_keys: int = 1024, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if interval_s < 0 or max_keys < 1:
            raise ValueError(f"interval_s must be >= 0 and max_keys >= 1, got {interval_s}, {max_keys}")
        self.interval_s = float(interval_s)
        self.max_keys = int(max_keys)
        self._clock = clock
        # key -> [time of the last allowed event, events held back since]; oldest-seen first.
        self._keys: OrderedDict[Hashable, list] = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, key: Hashable) -> int | None:
        """None if this event of ``key`` should be held back (it is counted); else how many were held back
        since the last allowed one."""
        now = self._clock()
        with self._lock:
            entry = self._keys.get(key)
            if entry is not None:
                self._keys.move_to_end(key)
                if now - entry[0] < self.interval_s:
                    entry[1] += 1
                    return None
                held_back, entry[0], entry[1] = entry[1], now, 0
                return held_back
            self._keys[key] = [now, 0]
            while len(self._keys) > self.max_keys:
                self._keys.popitem(last=False)
            return 0

    def __len__(self) -> int:
        return len(self._keys)


def peer_host(peer: str) -> str:
    """``context.peer()`` without the port (``"ipv4:10.0.0.1:53211"`` -> ``"ipv4:10.0.0.1"``).

    Every new connection of a client comes from a new port; keyed by host, a
    client cannot escape the limit by reconnecting.
    """
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rsplit(":", 1)[0]
    return peer


class FailureLog:
    """A :data:`saintpipe.core.grpc_status.FailureLogger` that rate-limits per peer host and kind.

    Args:
        what: names the server in every line, e.g. ``"feature shard 1"``.
        interval_s: at most one line per peer host and kind (rejected request / internal error) per interval.
        logger: where lines go.
        clock: see :class:`RateLimiter`.
    """

    def __init__(
        self,
        what: str,
        interval_s: float = 10.0,
        logger: logging.Logger = log,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self._limiter = RateLimiter(interval_s, clock=clock)
        self._log = logger

    def __call__(
        self, method: str, context: grpc.ServicerContext, exc: Exception, code: grpc.StatusCode
    ) -> None:
        try:
            peer = context.peer() or "unknown peer"
        except Exception:  # noqa: BLE001 - a context without a peer still gets its line
            peer = "unknown peer"
        internal = not isinstance(exc, SaintpipeError)
        held_back = self._limiter.allow((peer_host(peer), internal))
        if held_back is None:
            return
        more = f" ({held_back} more from this host since the last line)" if held_back else ""
        if internal:
            self._log.error(
                "%s: unexpected error in %s from %s%s", self.what, method, peer, more, exc_info=exc
            )
        else:
            self._log.warning(
                "%s: %s from %s: %s: %s%s", self.what, method, peer, code.name, one_line(str(exc), 300), more
            )
