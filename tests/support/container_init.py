"""A container's init process, for running a compose service as a local process.

``python container_init.py ARGV...`` does for ARGV what ``init: true`` (tini as
PID 1) and the container boundary do for a compose service: it adopts every
process ARGV leaves behind (``PR_SET_CHILD_SUBREAPER``: a ``ray start`` that
daemonizes its raylet still has this process as ancestor), forwards SIGTERM
and SIGINT to ARGV, and when ARGV exits (or this process is told to stop)
ends every remaining descendant, as stopping a container does. It exits with
ARGV's status. It also dies with its own parent (``PR_SET_PDEATHSIG``), so a
crashed test leaves nothing running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

import psutil

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _end_descendants(grace: float) -> None:
    """SIGTERM every descendant, reap them, SIGKILL what is left after ``grace`` seconds."""
    me = psutil.Process()
    procs = me.children(recursive=True)
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                              for p in procs if _exists(p)):
        _reap()
        time.sleep(0.1)
    for proc in me.children(recursive=True):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    time.sleep(0.1)
    _reap()


def _exists(proc: psutil.Process) -> bool:
    try:
        return proc.is_running()
    except psutil.NoSuchProcess:
        return False


def _reap() -> None:
    """Collect every exited child (adopted orphans included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # the parent died before prctl took effect
        return 1
    main_child = subprocess.Popen(argv)
    stopping: list[int] = []

    def forward(signum, _frame) -> None:
        stopping.append(signum)
        try:
            main_child.send_signal(signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    grace = float(os.environ.get("CONTAINER_STOP_GRACE", "15"))
    stop_deadline = None
    while main_child.returncode is None:
        try:  # reap adopted orphans while waiting, so none lingers as a zombie
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == main_child.pid:
            main_child.returncode = os.waitstatus_to_exitcode(status)
        elif pid == 0:
            if stopping and stop_deadline is None:
                stop_deadline = time.monotonic() + grace
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                main_child.kill()  # `docker stop` SIGKILLs after its grace period too
            time.sleep(0.1)
    code = main_child.returncode if main_child.returncode is not None else 1
    _end_descendants(grace=5.0)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
