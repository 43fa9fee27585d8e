"""Child processes that never outlive their parent.

Every server a saintpipe process starts for the user (redis-server, feature shards) is launched through
:func:`spawn`: on Linux the child asks the kernel for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), so
even a parent killed with SIGKILL leaves no orphan behind; :func:`terminate` stops a child gracefully, then
forcefully.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
from typing import IO, Any, Callable, Sequence

# The environment variable saintpipe.core.reaper marks Ray's processes with (its MARK).
REAPER_MARK = "SAINTPIPE_REAP_TOKEN"

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
# util-linux's setpriv sets the parent-death signal and execs the command.
_SETPRIV = shutil.which("setpriv")


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def with_parent_death_signal(argv: Sequence[str]) -> tuple[list[str], Callable[[], None] | None]:
    """``(argv, preexec_fn)`` that make the child get SIGTERM when its parent dies.

    ``setpriv --pdeathsig`` is preferred over a ``preexec_fn``: a preexec_fn makes Python fork() and run code
    in the child, and in a process where gRPC is active gRPC's fork handlers restart its poller threads in the
    child, whose epoll descriptor ``close_fds`` then closes: the child aborts before exec (seen as
    redis-server dying with SIGABRT). Without a preexec_fn Python uses vfork and no handler runs.
    """
    if not sys.platform.startswith("linux"):
        return list(argv), None
    if _SETPRIV:
        return [_SETPRIV, "--pdeathsig", "TERM", "--", *argv], None
    return list(argv), _die_with_parent


def spawn(argv: Sequence[str], *, env: dict[str, str] | None = None, stdout: int | IO[Any] | None = None,
          stderr: int | IO[Any] | None = None, cwd: str | None = None, text: bool = False,
          own_process_group: bool = False) -> subprocess.Popen[Any]:
    """Start ``argv`` as a child that receives SIGTERM when this process dies.

    Args:
        own_process_group: put the child in a process group of its own, so a Ctrl-C at the terminal reaches
            only this process, which then stops the child in its own order (a supervisor wants that; a tool
            that simply exits on Ctrl-C does not need it).
    """
    log.debug("spawning %s", " ".join(argv))
    full_argv, preexec = with_parent_death_signal(argv)
    # Not Ray's: while Ray starts on another thread, the environment carries the reaper's mark for Ray's
    # processes (saintpipe.core.reaper), which a child spawned here must not inherit.
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != REAPER_MARK}
    return subprocess.Popen(full_argv, env=env, stdout=stdout, stderr=stderr, cwd=cwd, text=text,
                            stdin=subprocess.DEVNULL, preexec_fn=preexec, close_fds=True,
                            process_group=0 if own_process_group else None)


def terminate(proc: subprocess.Popen[Any], grace: float = 5.0) -> int | None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL. Returns the exit code."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log.warning("pid %d ignored SIGTERM for %.1fs; killing it", proc.pid, grace)
            proc.kill()
            proc.wait()
        except ProcessLookupError:
            pass
    return proc.returncode
