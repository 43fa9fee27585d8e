"""N workers fill a pool with valid, distinct subgraphs; pinning; metrics; normalization stored once."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from saintpipe.services.dataset.normalization import load_stored, norm_dir
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.sampler.normalization import estimate_normalization
from saintpipe.services.sampler.parallel import subgraph_seed
from saintpipe.services.sampler_service.worker import build_sampler


def _assert_induced(sg, adjacency: sp.csr_matrix) -> None:
    ids = np.asarray(sg.node_ids)
    assert np.all(np.diff(ids) > 0), "node ids must be sorted and distinct"
    expected = adjacency[ids][:, ids].tocsr()
    expected.sort_indices()
    assert np.array_equal(sg.indptr, expected.indptr)
    assert np.array_equal(sg.indices, expected.indices)
    assert np.all(np.isfinite(sg.edge_weights)) and np.all(np.isfinite(sg.loss_weights))


@pytest.mark.parametrize("transport", ["shared_memory", "redis"])
def test_workers_fill_the_pool_with_valid_distinct_redrawable_subgraphs(make_service, svc_dataset, wait,
                                                                       drain_pool, scrape_metrics, transport,
                                                                       redis_server_session):
    # Whole subgraphs either way (wire auto would send node sets through Redis: test_sampler_service_nodes.py).
    service = make_service(workers=2, capacity=16, transport=transport, wire="full")
    pool = SubgraphPool(service.redis_url, service.config.job, capacity=16)
    wait(lambda: pool.stats().depth == 16, 60, "the pool to fill up to its capacity")
    assert pool.stats().produced == 16  # producers wait at capacity: nothing beyond it was added
    # Where the bytes are: a ~100-byte reference to a shared-memory slot, or the subgraph itself.
    client = redis_server_session.client()
    sizes = [client.strlen(k) for k in client.scan_iter(match=f"saintpipe:pool:{{{service.config.job}}}:sg:*")]
    assert 16 <= len(sizes) <= 18  # the entries, and the upload of each worker waiting for room
    assert (max(sizes) < 200) if transport == "shared_memory" else (min(sizes) > 1000)

    subgraphs = drain_pool(pool, 48)  # draining lets the workers go on
    # A worker whose process started late (a loaded machine) shows up a little later.
    wait(lambda: {sg.worker for sg in subgraphs} == {0, 1} or subgraphs.extend(drain_pool(pool, 4)), 60,
         "both workers' subgraphs")
    dataset = open_dataset(svc_dataset)
    adjacency = sp.csr_matrix((np.ones(dataset.num_edges), dataset.indices, dataset.indptr))
    pairs = [(sg.worker, sg.sequence) for sg in subgraphs]
    assert len(set(pairs)) == len(pairs), "a (worker, sequence) pair was delivered twice"
    assert {w for w, _ in pairs} == {0, 1}
    norm = load_stored(dataset, service.config.sampler, 8, 0)
    assert norm is not None
    sampler = build_sampler(service.config.sampler, dataset, norm)
    for sg in subgraphs:
        assert sg.job_id == service.config.job
        assert sg.seed == subgraph_seed(11, sg.worker, sg.sequence)
        _assert_induced(sg, adjacency)
    for sg in subgraphs[:5]:  # each can be drawn again bit for bit from (job seed, worker, sequence)
        again = replace(sampler.sample(sg.seed), job_id=sg.job_id, worker=sg.worker, sequence=sg.sequence)
        assert again.equals(sg)

    # Metrics, over HTTP, through the Prometheus text parser. A worker counts a push just after Redis has
    # it, so the counters may trail the drained entries for a moment.
    def counted() -> dict | None:
        service.stats()  # a fresh poll of the workers
        metrics = scrape_metrics(service.metrics_url)
        total = sum(v for (name, _), v in metrics.items() if name == "saintpipe_sampler_subgraphs_total")
        return metrics if total >= 48 else None

    metrics = wait(counted, 30, "the metrics to count every drained subgraph")
    for worker in (0, 1):
        label = (("worker", str(worker)),)
        produced = metrics[("saintpipe_sampler_subgraphs_total", label)]
        assert produced >= 1
        assert metrics[("saintpipe_sampler_sample_seconds_count", label)] == produced
        assert metrics[("saintpipe_sampler_nodes_total", label)] > produced  # subgraphs have many nodes
        assert metrics[("saintpipe_sampler_edges_total", label)] > 0
        assert metrics[("saintpipe_sampler_restarts_total", label)] == 0
    job = (("group", ""), ("job", service.config.job))  # the default group: empty
    assert metrics[("saintpipe_pool_acknowledged_total", job)] >= 48
    assert metrics[("saintpipe_pool_produced_total", job)] >= 48
    # The workers found the pool full and waited for room; that time is counted.
    assert sum(v for (name, _), v in metrics.items() if name == "saintpipe_sampler_pool_wait_seconds_total") > 0


def test_each_worker_is_pinned_to_its_own_core(make_service):
    service = make_service(workers=2)
    infos = service.worker_info()
    assert sorted(i.worker for i in infos) == [0, 1]
    for info in infos:
        assert info.affinity == (info.core,)
        assert info.pid != os.getpid()
    if len(os.sched_getaffinity(0)) >= 2:
        assert len({i.core for i in infos}) == 2
        assert not any(i.shared_core for i in infos)


def test_normalization_is_estimated_in_parallel_once_and_reused(make_service, svc_dataset):
    dataset = open_dataset(svc_dataset)
    config = {"kind": "random_walk", "roots": 25, "walk_length": 3}
    first = make_service(workers=2, sampler=config, norm_subgraphs=12, norm_seed=5)
    assert first.normalization_reused is False
    directory = norm_dir(svc_dataset, first.config.sampler)
    stamp = (directory / "meta.json").stat().st_mtime_ns
    # The workers' shares add up to the sampler's own serial estimate with the same seeds.
    serial = estimate_normalization(dataset.indptr, dataset.indices, first.config.sampler, num_subgraphs=12,
                                    train_nodes=dataset.splits["train"], seed=5, processes=1)
    stored = load_stored(dataset, first.config.sampler, 12, 5)
    assert np.array_equal(stored.loss_coefficients, serial.loss_coefficients)
    assert np.array_equal(stored.aggregator_coefficients, serial.aggregator_coefficients)

    first.stop()  # free its two CPUs for the next service's worker
    second = make_service(workers=1, sampler=config, norm_subgraphs=12, norm_seed=5)
    assert second.normalization_reused is True
    assert (directory / "meta.json").stat().st_mtime_ns == stamp


def test_oriented_lists_are_stored_with_the_dataset_once_and_mapped_by_the_workers(make_service, svc_dataset,
                                                                                   wait, drain_pool):
    service = make_service(workers=2, capacity=8, wire="full")
    directory = svc_dataset / "oriented" / "full"
    assert service._orientation_ref == str(directory), "the workers get the directory, not object-store copies"
    built = (directory / "meta.json").stat().st_mtime_ns
    pool = SubgraphPool(service.redis_url, service.config.job, capacity=8)
    subgraphs = drain_pool(pool, 16)
    dataset = open_dataset(svc_dataset)
    adjacency = sp.csr_matrix((np.ones(dataset.num_edges), dataset.indices, dataset.indptr))
    for sg in subgraphs:
        _assert_induced(sg, adjacency)
    service.stop()
    again = make_service(workers=1, capacity=8, wire="full")
    assert again._orientation_ref == str(directory)
    assert (directory / "meta.json").stat().st_mtime_ns == built, "stored lists are reused, not built again"
    for sg in drain_pool(SubgraphPool(again.redis_url, again.config.job, capacity=8), 4):
        _assert_induced(sg, adjacency)
