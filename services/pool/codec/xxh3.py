"""XXH3-64 callable from Numba kernels: the C functions inside the pinned ``xxhash`` wheel.

The ``xxhash`` extension module exports the library's C API (``XXH3_createState``,
``XXH3_64bits_update_dispatch``, ...). Loading it into LLVM's symbol table lets
compiled kernels call those functions by name, so the codec can hash each array
and check it in the same kernel, while it is in cache, with the same SIMD code
(and so the same digests) as ``xxhash.xxh3_64``. Calls are bound by name, not
by address, so kernels that use them can be cached on disk.

``AVAILABLE`` is False when the symbols are missing (another ``xxhash`` build);
the codec then hashes from Python instead.
"""

from __future__ import annotations

import ctypes
import logging

import xxhash
from numba import types

log = logging.getLogger(__name__)

_SYMBOLS = (
    "XXH3_createState",
    "XXH3_freeState",
    "XXH3_64bits_reset",
    "XXH3_64bits_update_dispatch",
    "XXH3_64bits_digest",
)


def _load() -> bool:
    try:
        import llvmlite.binding as llvm

        library = xxhash._xxhash.__file__  # type: ignore[attr-defined]  # the C extension: not in the stubs
        handle = ctypes.CDLL(library)
        for name in _SYMBOLS:
            getattr(handle, name)
        llvm.load_library_permanently(library)
        return True
    except (AttributeError, OSError, RuntimeError) as exc:
        log.info("xxhash's C functions are not callable from kernels (%s); hashing from Python", exc)
        return False


AVAILABLE = _load()

# Pointers travel as uintp (the same registers as void * in the C calling convention).
create_state = types.ExternalFunction("XXH3_createState", types.uintp())
free_state = types.ExternalFunction("XXH3_freeState", types.int32(types.uintp))
reset = types.ExternalFunction("XXH3_64bits_reset", types.int32(types.uintp))
update = types.ExternalFunction(
    "XXH3_64bits_update_dispatch", types.int32(types.uintp, types.uintp, types.uintp)
)
digest = types.ExternalFunction("XXH3_64bits_digest", types.uint64(types.uintp))
