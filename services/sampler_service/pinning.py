"""Which core a sampler worker binds to (section 4.3: one sampler per core)."""

from __future__ import annotations

import logging
import os
from typing import Sequence

log = logging.getLogger(__name__)


def choose_core(worker: int, available: Sequence[int]) -> tuple[int, bool]:
    """The core for ``worker`` among ``available``: round robin over the sorted cores.

    Returns:
        ``(core, shared)``; ``shared`` is true when there are more workers than
        cores, so this core is shared with at least one other worker.
    """
    if not available:
        raise ValueError("no cores available to pin to")
    cores = sorted(available)
    return cores[worker % len(cores)], worker >= len(cores)


def pin_process(core: int) -> None:
    """Bind every thread of this process to ``core``.

    ``sched_setaffinity(0, ...)`` binds only the calling thread on Linux; the
    process already runs helper threads (Ray's RPC threads, the actor's task
    threads), and threads started later inherit from their creator, so pin
    them all.
    """
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {core})
        except (ProcessLookupError, PermissionError):  # thread exited meanwhile / not ours to touch
            continue
    os.sched_setaffinity(0, {core})


def pin_to_core(worker: int) -> tuple[int, bool]:
    """Bind this process to its worker's core; return ``(core, shared)``.

    The candidate cores are the process's current affinity set (what the
    container or Ray's raylet allows), so pinning never leaves it.
    """
    available = sorted(os.sched_getaffinity(0))
    core, shared = choose_core(worker, available)
    if shared:
        log.warning("sampler worker %d: more workers than the %d cores available; sharing core %d round robin",
                    worker, len(available), core)
    pin_process(core)
    return core, shared
