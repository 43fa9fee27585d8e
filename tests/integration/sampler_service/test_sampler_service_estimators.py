"""The service's estimators: exact (stored, node sets induced by trainers), online (at once, whole subgraphs),
smoothed (pre-sampled, stored apart from the reference)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.services.dataset.normalization import load_stored, norm_dir
from saintpipe.core.subgraph import Subgraph
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.sampler.normalization import build_normalization, closed_form_coefficients
from saintpipe.services.sampler_service.config import SamplerServiceConfig


def test_auto_is_exact_for_the_edge_sampler_stored_and_reused(make_service, svc_dataset, wait):
    sampler = {"kind": "edge", "edge_budget": 30}
    first = make_service(workers=1, sampler=sampler, normalization="auto", wire="nodes")
    dataset = open_dataset(svc_dataset)
    stored = load_stored(dataset, first.config.sampler, 0, 0, method="exact")
    assert stored is not None and stored.method == "exact" and first.normalization_reused is False
    loss, alpha = closed_form_coefficients(dataset.indptr, dataset.indices, first.config.sampler,
                                           dataset.splits["train"])
    np.testing.assert_array_equal(stored.aggregator_coefficients, alpha)
    np.testing.assert_array_equal(stored.loss_coefficients, loss)
    assert norm_dir(svc_dataset, first.config.sampler, "exact").name.endswith(".exact")
    pool = SubgraphPool(first.redis_url, first.config.job)
    wait(lambda: pool.stats().depth >= 2, 60, "node sets in the pool")  # trainers read the stored coefficients
    second = make_service(workers=1, sampler=sampler, normalization="exact")
    assert second.normalization_reused is True


def test_online_starts_without_pre_sampling_and_sends_whole_subgraphs(make_service, svc_dataset, drain_pool):
    service = make_service(workers=1, normalization="auto", wire="auto", transport="redis")
    assert service.config.normalization_method() == "online"
    assert service._wire == "full"  # each worker's coefficients move: trainers could not induce node sets
    assert load_stored(open_dataset(svc_dataset), service.config.sampler, 0, 0, method="online") is None
    subgraphs = drain_pool(SubgraphPool(service.redis_url, service.config.job), 3)
    assert len(subgraphs) == 3 and all(isinstance(sg, Subgraph) for sg in subgraphs)
    assert all(np.all(np.isfinite(sg.edge_weights)) and sg.loss_weights.sum() > 0 for sg in subgraphs)


def test_online_with_the_nodes_wire_is_refused_with_what_to_change(make_service):
    with pytest.raises(ConfigError, match="normalization to exact, smoothed or reference"):
        make_service(workers=1, normalization="online", wire="nodes", transport="redis")


def test_smoothed_is_stored_apart_from_the_reference(make_service, svc_dataset):
    smoothed = make_service(workers=2, normalization="smoothed", norm_subgraphs=10, norm_seed=3)
    dataset = open_dataset(svc_dataset)
    stored = load_stored(dataset, smoothed.config.sampler, 10, 3, method="smoothed")
    assert stored is not None and stored.strength > 0
    want = build_normalization(dataset.indptr, dataset.indices, smoothed.config.sampler, method="smoothed",
                               train_nodes=dataset.splits["train"], num_subgraphs=10, seed=3, processes=1,
                               strength=stored.strength)
    np.testing.assert_allclose(stored.aggregator_coefficients, want.aggregator_coefficients, rtol=1e-6)
    assert load_stored(dataset, smoothed.config.sampler, 10, 3) is None  # the reference folder is another


def test_exact_for_a_sampler_without_a_closed_form_names_the_field(svc_dataset):
    with pytest.raises(ValueError, match="normalization: 'exact' needs closed-form probabilities"):
        SamplerServiceConfig(data=svc_dataset, normalization="exact", sampler={"kind": "frontier"})


def test_online_workers_share_one_state_that_the_supervisor_refreshes_and_removes(make_service, drain_pool, wait):
    from saintpipe.services.sampler.online_shared import SharedOnlineState

    service = make_service(workers=2, normalization="online", transport="redis")
    online = service._online
    assert online is not None and online.state.path.exists()
    assert online.state.path.parent == Path("/dev/shm") and online.normalization.shared_state == online.state.name
    pool = SubgraphPool(service.redis_url, service.config.job)
    wait(lambda: len(drain_pool(pool, 1)) and all(w.counters.subgraphs > 0 for w in service.stats().workers), 60,
         "both workers producing")
    # Draining keeps the workers producing (they wait while the pool is full). The small test graph's
    # count ends at a few subgraphs; the supervisor then writes the final coefficients.
    wait(lambda: drain_pool(pool, 1) and online.state.converged
         and online.refresher.estimator.subgraphs == online.state.subgraphs, 60, "the final refresh")
    assert online.state.subgraphs == online.state.max_subgraphs > 1 and online.state.refreshes >= 1
    # One state for both: every subgraph they produced was counted there (a private worker counts its own).
    pushed = sum(w.counters.subgraphs for w in service.stats().workers)
    assert online.state.subgraphs >= min(pushed, online.state.max_subgraphs or pushed)
    assert not np.array_equal(online.state.alpha, online.normalization.aggregator_coefficients)
    path = online.state.path
    service.stop()
    assert not path.exists()
    assert SharedOnlineState.attach(path.name, 1, 1) is None  # gone for a worker that restarts late
