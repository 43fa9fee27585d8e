"""Software prefetch: a hint that changes no value, and that reaches the machine code of the kernels using it."""

from __future__ import annotations

import platform

import numpy as np
import pytest
from numba import njit

from sampler_graphs import skewed_graph
from saintpipe.services.sampler.config import FrontierConfig, RandomWalkConfig
from saintpipe.services.sampler.kernels.frontier import frontier_select, frontier_select_tree
from saintpipe.services.sampler.kernels.induce import stage_subgraph
from saintpipe.services.sampler.kernels.prefetch import prefetch
from saintpipe.services.sampler.sampler import make_sampler


@njit(cache=False)
def _sum_with_hints(values, order, ahead):
    total = 0.0
    for i in range(order.size):
        prefetch(values, order[min(i + ahead, order.size - 1)])
        prefetch(values, np.uint64(order[i]) + np.uint64(1_000_000_000))  # far past the end: a hint never faults
        total += values[order[i]]
    return total


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64, np.uint64])
def test_prefetch_changes_no_value(dtype, index_dtype):
    values = np.arange(1000, dtype=dtype)
    order = np.random.default_rng(3).permutation(1000).astype(index_dtype)
    assert _sum_with_hints(values, order, 8) == float(values.astype(np.float64).sum())


def _place(n: int, e: int) -> tuple[np.ndarray, ...]:
    return (np.empty(n, np.int64), np.empty(n + 1, np.int64), np.empty(e, np.int32), np.empty(e, np.float32),
            np.empty(e, np.float32), np.empty(n, np.float32))


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="checks x86 prefetch instructions")
def test_the_sampling_kernels_issue_prefetches():
    indptr, indices = skewed_graph(3000, 8.0, seed=4)
    for config in (FrontierConfig(frontier_size=50, node_budget=400),
                   FrontierConfig(frontier_size=50, node_budget=400, dashboard="pins"), RandomWalkConfig(roots=200)):
        make_sampler(config, indptr, indices).sample_into(0, _place)
    # The kernels called from Python; their code includes the njit functions they call (the oriented
    # induction in stage_subgraph).
    for kernel in (stage_subgraph, frontier_select, frontier_select_tree):
        fresh = njit(cache=False)(kernel.py_func)  # code loaded from Numba's disk cache cannot be inspected
        assert kernel.signatures, kernel.__name__
        for sig in kernel.signatures:
            fresh.compile(sig)
            assert "prefetcht0" in fresh.inspect_asm(sig), f"{kernel.__name__} issues no prefetch"
