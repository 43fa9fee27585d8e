"""Workers that share one process ([samplers] workers_per_process): threads on cores of their own, one
interpreter; the same subgraphs as workers in processes of their own; scaled, removed and restarted alike."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import psutil
import pytest

from saintpipe.core.memory import process_memory
from saintpipe.services.dataset.normalization import load_stored
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.sampler.parallel import subgraph_seed
from saintpipe.services.sampler_service.worker import build_sampler


def _anonymous_kib(pid: int) -> int:
    anonymous = process_memory(pid)["anonymous"]
    assert anonymous > 0, f"/proc/{pid}/smaps_rollup unreadable"
    return anonymous // 1024


def test_two_workers_in_one_process_draw_their_own_streams_on_their_own_cores(make_service, svc_dataset, wait,
                                                                              drain_pool):
    service = make_service(workers=2, capacity=8, wire="full", workers_per_process=2)
    infos = service.worker_info()
    assert [i.worker for i in infos] == [0, 1]
    assert infos[0].pid == infos[1].pid, "both workers should live in one process"
    if len(os.sched_getaffinity(0)) >= 2:
        assert infos[0].core != infos[1].core, "each worker thread should claim a core of its own"
    pool = SubgraphPool(service.redis_url, service.config.job, capacity=8)
    subgraphs = drain_pool(pool, 24)
    wait(lambda: {sg.worker for sg in subgraphs} == {0, 1} or subgraphs.extend(drain_pool(pool, 4)), 60,
         "both workers' subgraphs")
    # Each subgraph is the one its (worker, sequence) seed draws: sharing a process changes no stream.
    dataset = open_dataset(svc_dataset)
    sampler = build_sampler(service.config.sampler, dataset, load_stored(dataset, service.config.sampler, 8, 0))
    pairs = [(sg.worker, sg.sequence) for sg in subgraphs]
    assert len(set(pairs)) == len(pairs)
    for sg in subgraphs[:12]:
        assert sg.seed == subgraph_seed(11, sg.worker, sg.sequence)
        again = replace(sampler.sample(sg.seed), job_id=sg.job_id, worker=sg.worker, sequence=sg.sequence)
        assert again.equals(sg)
    # A worker's CPU time is its own threads', not the process's (which counts both workers and Ray's): over
    # a window, the two workers' CPU together stays within the process's (read outside their reads).
    process = psutil.Process(infos[0].pid)

    def process_cpu() -> float:
        times = process.cpu_times()
        return times.user + times.system

    before_process = process_cpu()
    before = [w.counters.cpu_seconds for w in service.stats().workers]
    drain_pool(pool, 400)
    after = [w.counters.cpu_seconds for w in service.stats().workers]
    spent = process_cpu() - before_process
    worked = [b - a for a, b in zip(before, after, strict=True)]
    assert all(w > 0 for w in worked), worked
    assert sum(worked) <= spent + 0.02, f"workers counted {worked} s of CPU in a window where the process spent {spent} s"
    # The service's own reading counts that one process once, for both workers.
    low = process_cpu()
    assert low <= service.process_cpu_seconds() <= process_cpu()


def test_workers_join_and_leave_a_shared_process_and_come_back_with_it(make_service, wait, drain_pool):
    service = make_service(workers=1, capacity=8, wire="full", workers_per_process=2)
    pool = SubgraphPool(service.redis_url, service.config.job, capacity=8)
    drain_pool(pool, 8)
    (first,) = service.worker_info()
    before = _anonymous_kib(first.pid)

    assert service.add_workers(1) == [1]
    infos = service.worker_info()
    assert infos[1].pid == first.pid, "the added worker should join the process of worker 0"
    subgraphs = drain_pool(pool, 16)
    wait(lambda: 1 in {sg.worker for sg in subgraphs} or subgraphs.extend(drain_pool(pool, 4)), 60,
         "the added worker's subgraphs")
    # The added worker costs its sampler's scratch, not a second interpreter with numpy, Numba and Ray
    # (about 120 MiB of anonymous memory in a process of its own).
    added_mib = (_anonymous_kib(first.pid) - before) / 1024
    assert added_mib < 40, f"the second worker of a process added {added_mib:.1f} MiB of anonymous memory"

    assert service.remove_workers(1) == [1]
    assert service.worker_info()[0].pid == first.pid, "removing a member must leave the process running"
    count = service.stats().workers[0].counters.subgraphs
    drain_pool(pool, 8)
    wait(lambda: service.stats().workers[0].counters.subgraphs > count, 30, "worker 0 producing on")

    # The process dies: Ray restarts it, and the supervisor restarts both of its workers.
    service.add_workers(1)
    drain_pool(pool, 8)
    os.kill(first.pid, signal.SIGKILL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        stats = service.stats()
        if all(w.restarts >= 1 and w.pid not in (None, first.pid) for w in stats.workers):
            break
        drain_pool(pool, 1, timeout=30) if pool.stats().depth else time.sleep(0.2)
    else:
        pytest.fail(f"both workers should restart after their process died: {service.stats().workers}")
    infos = service.worker_info()
    assert infos[0].pid == infos[1].pid != first.pid
    subgraphs = drain_pool(pool, 24)
    wait(lambda: {sg.worker for sg in subgraphs} == {0, 1} or subgraphs.extend(drain_pool(pool, 4)), 60,
         "both restarted workers' subgraphs")
