"""Which core a sampler worker binds to (section 4.3: one sampler per core).

Ray places actors on hosts as it likes, so a worker's index says nothing
about which cores its neighbours on the same host took. Each worker therefore
claims a core on its host with an exclusive ``flock`` on a per-core lock file
(trying from ``index mod cores`` onwards) and holds it for its lifetime; the
kernel releases the lock when the process dies, so a restarted worker, or
the next job, finds the core free again. With more workers than cores on a
host, a worker shares the core ``index mod cores`` and says so.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

# How long a starting worker waits for a core held by an exiting process before it shares one.
CLAIM_WAIT_S = 2.0


def default_lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"saintpipe-cores-{os.getuid()}"


class CoreClaim:
    """An exclusive claim on one core of this host, held until :meth:`release` or the process ends."""

    def __init__(self, core: int, shared: bool, fd: int | None) -> None:
        self.core, self.shared, self._fd = core, shared, fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def claim_core(worker: int, available: Sequence[int], lock_dir: Path | None = None,
               wait_s: float = 0.0) -> CoreClaim:
    """Claim a free core, starting at ``worker mod len(available)``; share one when all stay taken.

    Args:
        worker: the worker index.
        available: the cores this process may use.
        lock_dir: where the per-core lock files live (default: a directory in the temp dir).
        wait_s: keep trying this long before sharing (a killed worker's process may still be exiting).
    """
    cores = sorted(available)
    if not cores:
        raise ValueError("no cores available to pin to")
    lock_dir = lock_dir or default_lock_dir()
    lock_dir.mkdir(parents=True, exist_ok=True)
    start = worker % len(cores)
    deadline = time.monotonic() + wait_s
    while True:
        for k in range(len(cores)):
            core = cores[(start + k) % len(cores)]
            fd = os.open(lock_dir / f"core-{core}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return CoreClaim(core, False, fd)
        if time.monotonic() >= deadline:  # more workers than free cores: share the round-robin one
            return CoreClaim(cores[start], True, None)
        time.sleep(0.1)


def pin_process(core: int) -> None:
    """Bind every thread of this process to ``core``.

    ``sched_setaffinity(0, ...)`` binds only the calling thread on Linux; the
    process already runs helper threads (Ray's RPC threads, the actor's task
    threads), and threads started later inherit from their creator, so pin
    them all.
    """
    _set_affinity("self", {core})
    os.sched_setaffinity(0, {core})


def keep_off_cores(pid: int, busy: Iterable[int]) -> set[int]:
    """Bind every thread of process ``pid`` to the cores not in ``busy``, or to all when none is left.

    For a helper the samplers depend on, such as a private Redis: left free to
    roam, the scheduler wakes it on the core of the worker that just sent it a
    request and the worker waits out the request on its own core. Returns the
    cores the process may now use.
    """
    available = set(os.sched_getaffinity(0))
    cores = available - set(busy) or available
    _set_affinity(str(pid), cores)
    return cores


def _set_affinity(pid: str, cores: set[int]) -> None:
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except (ProcessLookupError, PermissionError):  # thread exited meanwhile / not ours to touch
            continue


def pin_to_core(worker: int) -> CoreClaim:
    """Claim a core of this host for ``worker`` and bind this process to it.

    The candidate cores are the process's current affinity set (what the
    container or Ray's raylet allows), so pinning never leaves it.
    """
    claim = claim_member_core(worker, sorted(os.sched_getaffinity(0)))
    pin_process(claim.core)
    return claim


def pin_thread(core: int) -> None:
    """Bind the calling thread to ``core`` (a worker that shares its process draws on its own core)."""
    os.sched_setaffinity(0, {core})


def claim_member_core(worker: int, available: Sequence[int]) -> CoreClaim:
    """Claim a core for ``worker``, a further worker of a process already pinned by another; bind nothing
    (the worker's threads bind themselves with :func:`pin_thread`)."""
    claim = claim_core(worker, available, wait_s=CLAIM_WAIT_S)
    if claim.shared:
        log.warning("sampler worker %d: every one of the %d cores here is taken by a sampler; sharing core %d",
                    worker, len(available), claim.core)
    return claim
