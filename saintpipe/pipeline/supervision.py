"""Keeping a run's children in check: watch them, restart them, stop them all, in order, on any way out.

A :class:`Supervisor` holds the teardown of every component the runner
started (last started, first stopped), a watchdog thread that checks each
component's liveness, the restart of a component that died, and the
SIGINT/SIGTERM handlers. A component registered with a ``restart`` is
restarted when it dies, within a :class:`~saintpipe.pipeline.restarts.RestartBudget`
(so many restarts per window); the watchdog only notices, and the thread that
called :meth:`Supervisor.enable_restarts` carries the restart out in
:meth:`Supervisor.restart_pending`, because a child started by a thread gets its
death signal when that thread ends (``PR_SET_PDEATHSIG``). Any of three events
ends a run: a signal, a component that dies and may not be restarted (none is
during start-up, nor beyond its budget), or the work being done. In each case
every teardown step runs, each one even when an earlier one fails, so no
child outlives the run and every port it bound is freed. Children are also started so that they die with this
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
        print(sup.failure)  # None, or the component that failed and why
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
from typing import Any, Callable

from saintpipe.pipeline.restarts import RestartBudget, RestartEvent

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


@dataclass(frozen=True)
class Failure:
    """Why a component is unhealthy, and whether restarting it can help (not for bad input)."""

    reason: str
    restartable: bool = True


@dataclass
class _Watch:
    name: str
    check: Callable[[], str | Failure | None]  # None while healthy, else why it is not
    restart: Callable[[], object] | None = None


class Supervisor:
    """Teardown, liveness checks and signal handling for one run.

    Args:
        interval: seconds between liveness checks.
        out: where one-line notices go (signal received, component died, restarted).
        budget: how often a component may be restarted (default: 3 per 10 minutes).
    """

    def __init__(self, interval: float = 0.5, out=None, budget: RestartBudget | None = None) -> None:
        self.interval = interval
        self.out = out or sys.stderr
        self.budget = budget or RestartBudget()
        self.stop_requested = threading.Event()
        self.failure: str | None = None
        self.signal: signal.Signals | None = None
        self.restarts: list[RestartEvent] = []
        self._t0 = time.monotonic()
        self._teardown: list[tuple[str, Callable[[], object]]] = []
        self._watches: list[_Watch] = []
        self._pending: dict[str, tuple[_Watch, str]] = {}  # restarts noticed, not yet carried out
        self._restarts_enabled = False
        self._lock = threading.Lock()
        self._check_lock = threading.Lock()  # one thread at a time decides about a failure
        self._thread: threading.Thread | None = None
        self._previous: dict[int, Any] = {}  # signal -> the handler signal.signal returned
        self._closed = False

    # --- registration ---------------------------------------------------------------------------------
    def on_stop(self, name: str, fn: Callable[[], object]) -> None:
        """Run ``fn`` at teardown (in reverse order of registration)."""
        with self._lock:
            self._teardown.append((name, fn))

    def watch(
        self, name: str, check: Callable[[], str | Failure | None],
        restart: Callable[[], object] | None = None,
    ) -> None:
        """Check ``check()`` every interval; a reason it returns restarts the component or fails the run.

        Args:
            name: the component, in messages and in the restart budget.
            check: None while healthy, else why not (a str, or a :class:`Failure`).
            restart: brings the component back (it must leave ``check`` looking at the new one); without
                it, or past the budget, or for a ``Failure(restartable=False)``, the run fails.
        """
        with self._lock:
            self._watches.append(_Watch(name, check, restart))

    def watch_process(
        self, name: str, proc: subprocess.Popen | Callable[[], subprocess.Popen], where: str | None = "",
        restart: Callable[[], object] | None = None,
    ) -> None:
        """Notice when a process exits (whatever its status: a server must not stop on its own).

        ``proc`` may be a callable returning the current process, for one that ``restart`` replaces.
        """
        detail = f", {where}" if where else ""
        current = proc if callable(proc) else (lambda: proc)

        def check() -> str | None:
            p = current()
            code = p.poll()
            if code is None:
                return None
            return f"{name} (pid {p.pid}{detail}) exited unexpectedly with {describe_exit(code)}"

        self.watch(name, check, restart)

    def watch_pid(
        self, name: str, pid: int | None | Callable[[], int | None], where: str = "",
        restart: Callable[[], object] | None = None,
    ) -> None:
        """Notice when process ``pid`` (started by someone else in this process) ends.

        ``pid`` may be a callable returning the current pid, for a process that ``restart`` replaces.
        """
        if pid is None:
            return
        import psutil

        detail = f", {where}" if where else ""
        current = pid if callable(pid) else (lambda: pid)
        procs: dict[int | None, psutil.Process] = {}

        def check() -> str | None:
            now = current()
            try:
                proc: psutil.Process = procs.get(now) or procs.setdefault(now, psutil.Process(now))
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    return None
            except psutil.NoSuchProcess:
                pass
            procs.pop(now, None)
            return f"{name} (pid {now}{detail}) exited unexpectedly"

        if not psutil.pid_exists(current()):
            self.fail(f"{name} (pid {current()}{detail}) is not running")
            return
        self.watch(name, check, restart)

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
        """Run every liveness check once, in the calling thread (start-up uses it between steps).

        A failed component with a restart, while restarts are enabled and its budget lasts, is marked for
        :meth:`restart_pending`; any other failure fails the run.
        """
        with self._lock:
            watches = list(self._watches)
        with self._check_lock:
            for watch in watches:
                if self.stop_requested.is_set():
                    return
                if watch.name in self._pending:
                    continue  # already noticed; its restart is under way
                try:
                    found = watch.check()
                except Exception as exc:  # a check that cannot tell counts as a failure of its component
                    found = f"{watch.name}: health check failed: {exc}"
                if not found:
                    continue
                failure = found if isinstance(found, Failure) else Failure(found)
                if not (watch.restart and failure.restartable and self._restarts_enabled):
                    self.fail(failure.reason)
                    return
                if not self.budget.allow(watch.name, time.monotonic()):
                    used = self.budget.used(watch.name)
                    self.fail(f"{failure.reason}; restarted {used} time{'s' if used != 1 else ''} already, the "
                              f"most [run] max_restarts allows ({self.budget.describe()})" if used else
                              f"{failure.reason}; restarts are off ([run] max_restarts = 0)")
                    return
                with self._lock:
                    self._pending[watch.name] = (watch, failure.reason)
                self._notice(f"{failure.reason}: restarting it ({self.budget.used(watch.name)} of "
                             f"{self.budget.describe()})")

    def enable_restarts(self) -> None:
        """From now on failed components are restarted (by the caller of :meth:`restart_pending`)."""
        self._restarts_enabled = True

    def restart_pending(self) -> int:
        """Carry out the restarts the checks asked for, in the calling thread; returns how many were done.

        A restart that raises fails the run (its error names the component).
        """
        with self._lock:
            pending = dict(self._pending)
        done = 0
        for name, (watch, reason) in pending.items():
            if self.stop_requested.is_set():
                return done
            started = time.monotonic()
            try:
                if watch.restart is None:  # only watches with a restart are pending
                    raise TypeError(f"{name} has no restart")
                watch.restart()
            except Exception as exc:  # noqa: BLE001 - any way a restart fails ends the run, naming it
                self.fail(f"{reason}; restarting it failed: {exc}")
                return done
            finally:  # checked again only once its restart is over, so one death is one restart
                with self._lock:
                    self._pending.pop(name, None)
            self.restarts.append(RestartEvent(name, reason, round(started - self._t0, 1)))
            self._notice(f"{name} restarted in {time.monotonic() - started:.1f} s")
            done += 1
        return done

    @property
    def restart_under_way(self) -> bool:
        """A restart was noticed and not yet carried out."""
        return bool(self._pending)

    def _notice(self, line: str) -> None:
        print(f"saintpipe: {line}", file=self.out, flush=True)
        log.info(line)

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
