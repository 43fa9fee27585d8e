"""A killed worker is restarted, continues its sequence, and the restart shows in the metrics."""

from __future__ import annotations

import os
import signal

from saintpipe.services.pool.pool import SubgraphPool


def test_killed_worker_restarts_and_continues_its_sequence(make_service, wait, drain_pool, scrape_metrics):
    service = make_service(workers=2, capacity=8)
    pool = SubgraphPool(service.redis_url, service.config.job, capacity=8)
    before = drain_pool(pool, 16)
    victim = next(i for i in service.worker_info() if i.worker == 0)
    counted_before = {w.worker: w.counters.subgraphs for w in service.stats().workers}[0]

    os.kill(victim.pid, signal.SIGKILL)

    wait(lambda: service.stats().restarts >= 1, 60, "the supervisor to notice the dead worker")
    after = drain_pool(pool, 40)  # the pool keeps filling
    new = next(i for i in service.worker_info() if i.worker == 0)
    assert new.pid != victim.pid
    assert new.affinity == (new.core,) and new.core == victim.core  # the same slot, pinned again

    old_max = max((sg.sequence for sg in before if sg.worker == 0), default=-1)

    def resumed() -> bool:
        after.extend(drain_pool(pool, 4))
        return any(sg.worker == 0 and sg.sequence > old_max for sg in after)

    wait(resumed, 60, "the restarted worker to push again")
    pairs = [(sg.worker, sg.sequence) for sg in before + after]
    assert len(pairs) == len(set(pairs)), "the restarted worker repeated a subgraph"
    stats = {w.worker: w for w in service.stats().workers}
    assert stats[0].restarts == 1 and stats[1].restarts == 0
    metrics = scrape_metrics(service.metrics_url)
    assert metrics[("saintpipe_sampler_restarts_total", (("worker", "0"),))] == 1
    assert metrics[("saintpipe_sampler_restarts_total", (("worker", "1"),))] == 0
    # The new process counts from zero; the supervisor keeps what the dead one had counted.
    assert metrics[("saintpipe_sampler_subgraphs_total", (("worker", "0"),))] >= counted_before


def test_workers_are_added_and_removed_while_running(make_service, wait, drain_pool):
    service = make_service(workers=2, capacity=8)
    pool = SubgraphPool(service.redis_url, service.config.job, capacity=8)
    wait(lambda: drain_pool(pool, 2) and all(w.counters.subgraphs for w in service.stats().workers), 60,
         "both workers to push")
    assert service.remove_workers(1) == [1]
    assert [i.worker for i in service.worker_info()] == [0]
    removed_count = service.stats().removed[1].subgraphs
    assert removed_count >= 1
    only = drain_pool(pool, 20)  # worker 0 alone keeps the pool filling
    assert {sg.worker for sg in only[8:]} == {0}  # entries already queued may still come from worker 1

    last_seq_1 = max([sg.sequence for sg in only if sg.worker == 1], default=-1)
    assert service.add_workers(1) == [1]  # the free index is reused
    got = wait(lambda: [sg for sg in drain_pool(pool, 4) if sg.worker == 1], 60, "the re-added worker to push")
    assert all(sg.sequence > last_seq_1 for sg in got), "a re-added worker must continue its sequence"
    stats = {w.worker: w for w in service.stats().workers}
    assert stats[1].counters.subgraphs > removed_count  # its earlier counts are kept
