"""Child processes that never outlive their parent.

Every server a saintpipe process starts for the user (redis-server, feature
shards) is launched through :func:`spawn`: on Linux the child asks the kernel
for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), so even a parent
killed with SIGKILL leaves no orphan behind; :func:`terminate` stops a child
gracefully, then forcefully.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
from typing import Sequence

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(argv: Sequence[str], *, env: dict[str, str] | None = None, stdout=None, stderr=None,
          cwd: str | None = None, text: bool = False, own_process_group: bool = False) -> subprocess.Popen:
    """Start ``argv`` as a child that receives SIGTERM when this process dies.

    Args:
        own_process_group: put the child in a process group of its own, so a
            Ctrl-C at the terminal reaches only this process, which then stops
            the child in its own order (a supervisor wants that; a tool that
            simply exits on Ctrl-C does not need it).
    """
    log.debug("spawning %s", " ".join(argv))
    return subprocess.Popen(list(argv), env=env, stdout=stdout, stderr=stderr, cwd=cwd, text=text,
                            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, close_fds=True,
                            process_group=0 if own_process_group else None)


def terminate(proc: subprocess.Popen, grace: float = 5.0) -> int | None:
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
