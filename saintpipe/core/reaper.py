"""A watchdog that kills what a process started through others, once that process is gone.

The servers a run starts itself die with it (``PR_SET_PDEATHSIG``, see
:mod:`saintpipe.core.procutil`), but not the processes those start in turn. A
local Ray's head processes share the run's fate, yet its dashboard and
runtime-env agents, on noticing their raylet gone, first report that to a GCS
that died too, and that call waits out a 60 s timeout: after a SIGKILLed
``saintpipe run`` they outlived it by a minute (measured; docs/explanation/reliability.md).

So the run starts a small watchdog (:func:`start_reaper`, with the
parent-death signal) and marks its environment with a random token while it
starts Ray (:meth:`Reaper.marking`): the processes started then, and
everything they start later (Ray's workers, its agents), inherit the mark;
what the run starts afterwards (a restarted shard) does not. When the run
ends, however it ends, the watchdog gets SIGTERM (from the kernel, or from
:meth:`Reaper.stop` after an orderly stop) and SIGKILLs every process of this
user that carries the mark. Nothing else is touched: two runs at once each
reap only their own.

Run as ``python -m saintpipe.core.reaper TOKEN``; stdlib only, so it starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from saintpipe.core.procutil import REAPER_MARK

MARK = REAPER_MARK
# How often the watchdog follows the marked processes' descendants (a /proc scan: a few ms).
SCAN_INTERVAL_S = 0.5


def _stat(pid: str, proc: str) -> tuple[int, int] | None:
    """``(parent pid, start time in clock ticks)`` of a process, or None when it is gone."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after the command, which may hold spaces
        return int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _has_mark(pid: str, needle: bytes, proc: str) -> bool:
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:  # gone meanwhile, or another user's
        return False


class Tracker:
    """The marked processes and every descendant of theirs, each known by pid and start time.

    A process that rewrites its title (Ray's agents do, with setproctitle) overwrites the memory
    ``/proc/PID/environ`` shows, mark included; so the descendants of marked processes are followed
    through their parent links while those still exist, and remembered: once a parent is killed, its
    children belong to init and the link is gone.
    """

    def __init__(self, token: str, proc: str = "/proc") -> None:
        self.needle, self.proc = f"{MARK}={token}".encode(), proc
        self.known: dict[int, int] = {}  # pid -> start time
        self.ever: set[tuple[int, int]] = set()  # (pid, start time) of every process ever followed

    def scan(self) -> None:
        children: dict[int, list[int]] = {}
        starts: dict[int, int] = {}
        roots = []
        for name in os.listdir(self.proc):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            stat = _stat(name, self.proc)
            if stat is None:
                continue
            pid = int(name)
            children.setdefault(stat[0], []).append(pid)
            starts[pid] = stat[1]
            if self.known.get(pid) == stat[1] or _has_mark(name, self.needle, self.proc):
                roots.append(pid)
        found: dict[int, int] = {}
        stack = roots
        while stack:
            pid = stack.pop()
            if pid not in found:
                found[pid] = starts[pid]
                stack.extend(children.get(pid, ()))
        self.known = found  # the dead, and pids reused by another process, drop out
        self.ever.update(found.items())

    def alive(self) -> list[int]:
        return [pid for pid, t in self.known.items() if (stat := _stat(str(pid), self.proc)) and stat[1] == t]


def reap(token: str, tracker: Tracker | None = None) -> list[int]:
    """SIGKILL every marked process and every descendant of one, again until none is left; the pids killed."""
    tracker = tracker or Tracker(token)
    killed: list[int] = []
    for _ in range(20):
        tracker.scan()
        pids = tracker.alive()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        time.sleep(0.05)
    return killed


class Reaper:
    """The watchdog of one run, and the token it reaps by."""

    def __init__(self, watchdog: subprocess.Popen[Any], token: str) -> None:
        self.watchdog, self.token = watchdog, token

    @contextlib.contextmanager
    def marking(self) -> Iterator[None]:
        """Processes started inside (and everything they start, at any time) carry the mark."""
        os.environ[MARK] = self.token
        try:
            yield
        finally:
            os.environ.pop(MARK, None)

    def stop(self, timeout: float = 10.0) -> None:
        """Reap what is still marked now (an orderly stop has already stopped it: stragglers only)."""
        from saintpipe.core.procutil import terminate

        terminate(self.watchdog, grace=timeout)
        reap(self.token)  # what the watchdog could not see through (it is gone now either way)


def start_reaper() -> Reaper | None:
    """Start the watchdog; ``None`` off Linux (no parent-death signal) or off the main thread.

    The parent-death signal follows the *thread* that started the watchdog: started from a thread that
    ends before the run (a user's loader in a worker thread, say) it would reap the run while it runs.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    from saintpipe.core.procutil import spawn

    token = secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != MARK}  # the watchdog must not reap itself
    # Started with SIGTERM blocked (a child inherits the mask): a death signal that comes while the
    # watchdog is still starting stays pending for its sigwait, instead of ending it before it reaps.
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        watchdog = spawn([sys.executable, "-m", "saintpipe.core.reaper", token], env=env)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return Reaper(watchdog, token)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m saintpipe.core.reaper TOKEN", file=sys.stderr)
        return 2
    # SIGTERM comes from the kernel when the parent dies (or from Reaper.stop); a Ctrl-C is the run's.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # blocked already by start_reaper; by hand too
    parent = os.getppid()
    tracker = Tracker(argv[0])
    while signal.sigtimedwait({signal.SIGTERM}, SCAN_INTERVAL_S) is None:
        tracker.scan()
    reap(argv[0], tracker)
    # The run's /dev/shm files (pool slots, feature regions, the online normalization state) whose owners
    # were killed have no one left to remove them: the run's, only (its Ray processes and the runner). After
    # a parent that died unannounced (SIGKILL), its processes are still exiting: look again for a few seconds.
    owners = {pid for pid, _ in tracker.ever} | {parent}
    remove_orphaned_files(owners, rounds=1 if os.getppid() == parent else 8)
    return 0


def remove_orphaned_files(owners: set[int], rounds: int = 1, pause_s: float = 0.5) -> list[str]:
    """Remove the saintpipe /dev/shm files (:mod:`saintpipe.core.shm_owners`) of the processes ``owners``
    (pids of this PID namespace) that are dead, in ``rounds`` passes ``pause_s`` apart while one of those
    processes still holds a file; the names removed. Another process's files are never touched."""
    from saintpipe.core import shm_owners

    namespace = shm_owners.pid_namespace()

    def ours(f: shm_owners.ShmFile) -> bool:
        return f.owner is not None and f.owner.namespace == namespace and f.owner.pid in owners

    removed: list[str] = []
    for done in range(1, rounds + 1):
        removed += [f.name for f in shm_owners.remove_leftovers(shm_owners.SHM_DIR, shm_owners.KINDS,
                                                               keep=lambda f: not ours(f))]
        if done == rounds or not any(ours(f) for f in shm_owners.scan(shm_owners.SHM_DIR, shm_owners.KINDS)):
            break
        time.sleep(pause_s)
    return removed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
