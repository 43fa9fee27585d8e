"""The Dashboard's contiguous fills and compaction are vectorized (the paper's AVX intra-sampler parallelism).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from sampler_graphs import random_graph
from saintpipe.services.sampler.config import FrontierConfig
from saintpipe.services.sampler.kernels.dashboard import cleanup, fill_pins, move_pins
from saintpipe.services.sampler.kernels.frontier import frontier_select
from saintpipe.services.sampler.kernels.rng import bounded, seed_state
from saintpipe.services.sampler.sampler import make_sampler


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


pytestmark = pytest.mark.skipif("avx2" not in _cpu_flags(),
                                reason="the CPU has no AVX2 (no 'avx2' in /proc/cpuinfo flags)")

# A store of a whole 256- or 512-bit register to memory: vmovdqu %ymm0, (%rax,%rcx,4)
VECTOR_STORE = re.compile(r"^\s*vmov\w*\s+%[yz]mm\d+, [^%\n]*\(", re.MULTILINE)


def _kernel_asm(dispatcher) -> str:
    """The assembly of the kernel's own body (not its Python wrapper) for the signatures it was used with.

    Code loaded from Numba's on-disk cache cannot be inspected, so the same
    Python function is compiled again, uncached, with the same signatures and
    the same (host CPU) target. The wrapper is cut off because it moves array
    structs with vector registers whatever the kernel does.
    """
    assert dispatcher.signatures, f"{dispatcher.__name__} was not compiled"
    fresh = njit(cache=False)(dispatcher.py_func)
    bodies = []
    for sig in dispatcher.signatures:
        fresh.compile(sig)
        asm = fresh.inspect_asm(sig)
        start = asm.index(f"{dispatcher.__name__}B")  # the mangled name of the kernel itself comes first
        bodies.append(asm[start:asm.index(".Lfunc_end0", start)])
    return "\n".join(bodies)


def _vector_stores(dispatcher) -> list[str]:
    body = _kernel_asm(dispatcher)
    assert "scatter" not in body, f"{dispatcher.__name__} scatters instead of storing contiguously"
    return VECTOR_STORE.findall(body)


def test_dashboard_fill_and_compaction_use_vector_instructions():
    db = np.full(4096, -1, dtype=np.int32)
    fill_pins(db, np.int64(3), np.int64(4000), np.int32(7))
    assert np.all(db[3:4000] == 7) and db[2] == -1 and db[4000] == -1
    new = np.empty_like(db)
    move_pins(new, np.int64(0), db, np.int64(3), np.int64(3997))
    assert np.all(new[:3997] == 7)
    for kernel in (fill_pins, move_pins):
        assert _vector_stores(kernel), f"no ymm/zmm vector store in {kernel.__name__}"
    # The pattern discriminates: scalar code (the random stream) has none.
    state = np.zeros(4, dtype=np.uint64)
    seed_state(state, np.uint64(1))
    bounded(state, np.int64(10))
    assert not _vector_stores(bounded)


def test_frontier_kernel_inlines_vectorized_fills_and_cleanup():
    indptr, indices = random_graph(500, 3000, seed=1)
    sampler = make_sampler(FrontierConfig(frontier_size=20, node_budget=200, eta=1.1, dashboard="pins"),
                           indptr, indices)
    sampler.sample(0)
    assert sampler.last_stats["cleanups"] > 0
    for kernel in (frontier_select, cleanup):
        assert _vector_stores(kernel), f"no vector store in {kernel.__name__}"
