"""Pinned worker processes: one per core, own streams, results in order, failures surface."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sampler_graphs import random_graph
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.config import RandomWalkConfig
from saintpipe.services.sampler.parallel import available_cores, measure_throughput, run_pinned, subgraph_seed
from saintpipe.services.sampler.sampler import make_sampler

# Pins worker processes to cores and measures their throughput: the cores to itself (tests/conftest.py).
pytestmark = pytest.mark.serial


def test_workers_are_pinned_one_per_core_in_order():
    cores = available_cores()

    def work(ctx):
        return ctx.worker, ctx.num_workers, ctx.core, sorted(os.sched_getaffinity(0)), os.getpid()

    results = run_pinned(work, processes=3)
    assert [r[0] for r in results] == [0, 1, 2] and all(r[1] == 3 for r in results)
    for worker, _, core, affinity, pid in results:
        assert core == cores[worker % len(cores)] and affinity == [core]
        assert pid != os.getpid()
    assert sorted(os.sched_getaffinity(0)) == cores, "the parent keeps its own affinity"


def test_each_worker_samples_its_own_stream():
    indptr, indices = random_graph(2000, 6000, seed=2)
    sampler = make_sampler(RandomWalkConfig(roots=20), indptr, indices)

    def work(ctx):
        return [sampler.sample(subgraph_seed(5, ctx.worker, s)).node_ids for s in range(3)]

    per_worker = run_pinned(work, processes=2)
    for worker, subgraphs in enumerate(per_worker):
        for s, node_ids in enumerate(subgraphs):
            assert np.array_equal(node_ids, sampler.sample(subgraph_seed(5, worker, s)).node_ids)
    assert not np.array_equal(per_worker[0][0], per_worker[1][0])


def test_worker_failure_raises_in_the_parent():
    def work(ctx):
        if ctx.worker == 1:
            raise InvalidArgument("worker one cannot")
        return ctx.worker

    with pytest.raises(InvalidArgument, match="worker one cannot"):
        run_pinned(work, processes=2)
    with pytest.raises(InvalidArgument, match="processes"):
        run_pinned(lambda ctx: 0, processes=0)


def test_throughput_counts_subgraphs_nodes_and_edges():
    indptr, indices = random_graph(2000, 6000, seed=3)
    sampler = make_sampler(RandomWalkConfig(roots=50), indptr, indices)
    result = measure_throughput(sampler, seconds=0.2, processes=2, job_seed=1)
    assert result.processes == 2 and result.subgraphs >= 2
    assert result.subgraphs_per_s > 0 and result.nodes_per_s > result.subgraphs_per_s
    assert 0 < result.nodes / result.subgraphs <= 150 and result.edges > 0
