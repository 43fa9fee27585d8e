"""glibc malloc tuning for processes that move large buffers (feature rows, subgraph messages).

With glibc's defaults a megabyte-sized buffer is mmap'ed fresh and unmapped on free, or trimmed from the heap
top, so the next call page-faults it in again; glibc also moves its mmap threshold by itself as buffers are
freed, so whether a process runs in the faulting mode depends on the order of its first frees. Fixing both
thresholds keeps freed buffers in the heap for the next call; the cost is up to ``trim_threshold`` bytes of
freed memory mapped per arena. Used by the feature shards and their clients, the pool's benchmark, and the
sampler workers, whose kernels allocate a few MB of scratch per subgraph (measured effects:
docs/explanation/decisions.md#fixed-malloc-thresholds).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc caps the mmap threshold at 32 MiB on 64-bit (HEAP_MAX_SIZE / 2); larger values are refused.
MAX_MMAP_THRESHOLD = 32 * 1024 * 1024


def tune_malloc(mmap_threshold: int = MAX_MMAP_THRESHOLD, trim_threshold: int = 64 * 1024 * 1024) -> bool:
    """Keep buffers up to ``mmap_threshold`` bytes in the heap and trim it only above ``trim_threshold``.

    Process-wide; call it early. Returns False (and changes nothing) where the C library is not glibc.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.debug("no mallopt in %s: malloc left as is", name)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = bool(mallopt(_M_MMAP_THRESHOLD, min(mmap_threshold, MAX_MMAP_THRESHOLD)))
    ok = bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold)) and ok
    log.debug("mallopt mmap_threshold=%d trim_threshold=%d: %s", mmap_threshold, trim_threshold, ok)
    return ok
