"""Keeping a run's children in check: watch them, stop them all, in order, on any way out.

A :class:`Supervisor` holds the teardown of every component the runner
started (last started, first stopped), a watchdog thread that checks each
component's liveness, and the SIGINT/SIGTERM handlers. Any of three events
ends a run: a signal, a component that dies (a feature shard, Redis, a Ray
actor), or the work being done. In each case every teardown step runs, each
one even when an earlier one fails, so no child outlives the run and every
port it bound is freed. Children are also started so that they die with this
process (``PR_SET_PDEATHSIG``, see :mod:`saintpipe.core.procutil`), which covers a
runner killed with SIGKILL.

Example::

    with Supervisor() as sup:
        proc = procutil.spawn([...])
        sup.on_stop("feature shard 0", lambda: procutil.terminate(proc))
        sup.watch_process("feature shard 0", proc)
        sup.start_watching()
        while not sup.stop_requested.wait(1.0):
            ...
        sup.raise_if_failed()
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType
from typing import Callable

from saintpipe.core.errors import ServiceUnavailable

log = logging.getLogger(__name__)

# Exit status of a run stopped by a signal: 128 + the signal's number, as shells report it.
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def describe_exit(returncode: int) -> str:
    """``exit code 3`` or ``signal SIGKILL`` for a Popen return code."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


@dataclass
class _Watch:
    name: str
    check: Callable[[], str | None]  # None while healthy, else why it is not


class Supervisor:
    """Teardown, liveness checks and signal handling for one run.

    Args:
        interval: seconds between liveness checks.
        out: where one-line notices go (signal received, component died).
    """

    def __init__(self, interval: float = 0.5, out=None) -> None:
        self.interval = interval
        self.out = out or sys.stderr
        self.stop_requested = threading.Event()
        self.failure: str | None = None
        self.signal: signal.Signals | None = None
        self._teardown: list[tuple[str, Callable[[], object]]] = []
        self._watches: list[_Watch] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._previous: dict[int, object] = {}
        self._closed = False

    # --- registration ---------------------------------------------------------------------------------
    def on_stop(self, name: str, fn: Callable[[], object]) -> None:
        """Run ``fn`` at teardown (in reverse order of registration)."""
        with self._lock:
            self._teardown.append((name, fn))

    def watch(self, name: str, check: Callable[[], str | None]) -> None:
        """Check ``check()`` every interval; a string return value fails the run with that reason."""
        with self._lock:
            self._watches.append(_Watch(name, check))

    def watch_process(self, name: str, proc: subprocess.Popen, where: str = "") -> None:
        """Fail the run when ``proc`` exits (whatever its status: a server must not stop on its own)."""
        detail = f", {where}" if where else ""

        def check() -> str | None:
            code = proc.poll()
            if code is None:
                return None
            return f"{name} (pid {proc.pid}{detail}) exited unexpectedly with {describe_exit(code)}"

        self.watch(name, check)

    def watch_pid(self, name: str, pid: int | None, where: str = "") -> None:
        """Fail the run when process ``pid`` (started by someone else in this process) ends."""
        if pid is None:
            return
        import psutil

        detail = f", {where}" if where else ""
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            self.fail(f"{name} (pid {pid}{detail}) is not running")
            return

        def check() -> str | None:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    return None
            except psutil.NoSuchProcess:
                pass
            return f"{name} (pid {pid}{detail}) exited unexpectedly"

        self.watch(name, check)

    # --- signals --------------------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """SIGINT/SIGTERM request a stop; a second one interrupts a teardown step that hangs.

        Call again after a library that installs its own handlers (``ray.init``) has started.
        """
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.signal(sig, self._on_signal)
            self._previous.setdefault(sig, previous)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        sig = signal.Signals(signum)
        if self.signal is not None or self._closed:
            raise KeyboardInterrupt(f"second {sig.name}")
        self.signal = sig
        print(f"\nsaintpipe: {sig.name} received: stopping every component", file=self.out, flush=True)
        self.stop_requested.set()

    def restore_signal_handlers(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    # --- watching -------------------------------------------------------------------------------------
    def start_watching(self) -> None:
        """Start the watchdog thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch_loop, name="pipeline-watchdog", daemon=True)
            self._thread.start()

    def check_now(self) -> None:
        """Run every liveness check once, in the calling thread (start-up uses it between steps)."""
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            if self.stop_requested.is_set():
                return
            try:
                reason = watch.check()
            except Exception as exc:  # a check that cannot tell counts as a failure of its component
                reason = f"{watch.name}: health check failed: {exc}"
            if reason:
                self.fail(reason)
                return

    def _watch_loop(self) -> None:
        while not self.stop_requested.wait(self.interval):
            self.check_now()

    def fail(self, reason: str) -> None:
        """Record the first failure and request a stop."""
        if self.stop_requested.is_set():
            return  # stopping anyway: a component that exits now is being stopped, not failing
        with self._lock:
            if self.failure is None:
                self.failure = reason
        print(f"\nsaintpipe: {reason}: stopping every component", file=self.out, flush=True)
        self.stop_requested.set()

    def request_stop(self) -> None:
        """The work is done: stop (not a failure)."""
        self.stop_requested.set()

    def raise_if_failed(self) -> None:
        """Raise :class:`ServiceUnavailable` naming the component that failed, if one did."""
        if self.failure is not None:
            raise ServiceUnavailable(f"{self.failure}; the pipeline was stopped")

    @property
    def exit_code(self) -> int:
        """0, or the conventional status of the signal that stopped the run."""
        return SIGNAL_EXIT.get(self.signal, 1) if self.signal is not None else 0

    # --- teardown -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the watchdog, then run every teardown step, last registered first. Idempotent."""
        if self._closed:
            return
        self.stop_requested.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval * 4 + 5)
        with self._lock:
            steps, self._teardown = list(reversed(self._teardown)), []
        for name, fn in steps:
            started = time.monotonic()
            try:
                fn()
            except KeyboardInterrupt:
                log.warning("stopping %s interrupted; going on with the rest", name)
            except Exception:
                log.exception("stopping %s failed; going on with the rest", name)
            log.debug("stopped %s in %.2f s", name, time.monotonic() - started)
        self._closed = True
        self.restore_signal_handlers()

    def __enter__(self) -> "Supervisor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
