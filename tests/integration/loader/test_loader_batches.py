"""``saintpipe.loader`` on a real embedded pipeline (Redis, two feature-shard processes, Ray, the sampler service).

One embedded pipeline (module fixture) serves every test here; each test reads
it through its own loader (``SubgraphLoader.connect`` on the pipeline's
addresses, its own consumer name), as a user's script would read a pipeline
that runs elsewhere. The batches are checked against the dataset on disk:
features, induced edges, labels, masks, weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.pool.pool import SubgraphPool
from torch.utils.data import DataLoader

from saintpipe.core.errors import ConfigError, ServiceUnavailable
from saintpipe.loader import SubgraphLoader
from tests.integration.loader.conftest import overrides, unique_job
from tests.support.cli import free_port


@pytest.fixture(scope="module")
def pipeline_loader(loader_data):
    with SubgraphLoader.embedded(loader_data, overrides=overrides(unique_job("batches"))) as loader:
        yield loader


def reader(embedded: SubgraphLoader, name: str, **options) -> SubgraphLoader:
    """Another loader on the embedded pipeline, through its public addresses."""
    a = embedded.address
    return SubgraphLoader.connect(a.redis_url, a.job, a.features, a.data, trainer=a.trainer, pool=a.pool, name=name,
                                  **options)


def acknowledged(loader: SubgraphLoader) -> int:
    with SubgraphPool.from_config(loader.address.pool, url=loader.address.redis_url) as pool:
        return pool.stats().acknowledged


def induced_edges(dataset, ids: np.ndarray) -> set[tuple[int, int]]:
    """(u, v) local pairs of every full-graph edge between two of ``ids`` (v aggregates from u)."""
    local = {int(g): i for i, g in enumerate(ids)}
    out = set()
    for v, g in enumerate(ids):
        for u in dataset.indices[dataset.indptr[g]:dataset.indptr[g + 1]]:
            if int(u) in local:
                out.add((local[int(u)], v))
    return out


def test_minibatches_hold_the_datasets_rows_edges_labels_and_weights(pipeline_loader, loader_data):
    dataset = open_dataset(loader_data)
    train = np.zeros(dataset.num_nodes, dtype=bool)
    train[dataset.splits["train"]] = True
    loader = reader(pipeline_loader, "check", steps=5)
    assert len(loader) == 5 and loader.num_features == dataset.manifest.feature_dim
    before = acknowledged(loader)
    batches = list(DataLoader(loader, batch_size=None))
    assert [b.step for b in batches] == list(range(5))
    assert len({b.entry_id for b in batches}) == 5
    for b in batches:
        n, e = b.num_nodes, b.num_edges
        ids = b.node_ids.numpy()
        assert n > 0 and e > 0
        assert np.all(np.diff(ids) > 0) and 0 <= ids[0] and ids[-1] < dataset.num_nodes
        assert b.x.dtype == torch.float32 and b.x.shape == (n, dataset.manifest.feature_dim)
        np.testing.assert_array_equal(b.x.numpy(), dataset.gather_features(ids))
        assert b.edge_index.dtype == torch.int64 and b.edge_index.shape == (2, e)
        pairs = set(zip(b.edge_index[0].tolist(), b.edge_index[1].tolist()))
        assert len(pairs) == e and pairs == induced_edges(dataset, ids)
        np.testing.assert_array_equal(np.diff(b.indptr.numpy()), np.bincount(b.edge_index[1].numpy(), minlength=n))
        for w in (b.edge_weight, b.edge_weight_t):
            assert w.shape == (e,) and bool(torch.isfinite(w).all()) and bool((w > 0).all())
        np.testing.assert_array_equal(b.y.numpy(), dataset.labels[ids])
        np.testing.assert_array_equal(b.train_mask.numpy(), train[ids])
        np.testing.assert_array_equal(b.degree.numpy(), np.diff(dataset.indptr)[ids].astype(np.float32))
        lw = b.loss_weight
        assert bool(torch.isfinite(lw).all()) and bool((lw >= 0).all()) and float(lw.sum()) > 0
        assert not bool(lw[~b.train_mask].any())  # only training nodes carry loss
        assert torch.isfinite(b.loss(torch.zeros(n, loader.num_classes)))
    assert acknowledged(loader) - before == 5  # a bounded iteration acknowledges every minibatch it yielded


def test_a_minibatch_not_finished_comes_back_to_the_next_iteration(pipeline_loader):
    loader = reader(pipeline_loader, "again", steps=None)
    taken = []
    for batch in DataLoader(loader, batch_size=None):
        taken.append(batch)
        if len(taken) == 2:
            break  # the second one's step never finished: it was not acknowledged
    first, second = taken
    again = []
    for batch in DataLoader(loader, batch_size=None):
        again.append(batch)
        if len(again) == 4:
            break
    assert again[0].entry_id == second.entry_id and again[0].deliveries == 2
    torch.testing.assert_close(again[0].x, second.x)
    assert first.entry_id not in {b.entry_id for b in again}  # acknowledged when the second was asked for


def test_epochs_bound_ends_once_the_training_nodes_add_up(pipeline_loader, loader_data):
    num_train = open_dataset(loader_data).splits["train"].size
    loader = reader(pipeline_loader, "epochs", epochs=2)
    with pytest.raises(TypeError):
        len(loader)
    batches = list(loader)
    labelled = [b.num_labelled for b in batches]
    assert sum(labelled) >= 2 * num_train > sum(labelled[:-1])
    assert [b.epoch for b in batches] == sorted(b.epoch for b in batches) and batches[-1].epoch <= 1
    assert batches[0].epoch == 0


def test_dataloader_workers_share_the_steps(pipeline_loader):
    loader = reader(pipeline_loader, "workers", steps=7)
    before = acknowledged(loader)
    batches = list(DataLoader(loader, batch_size=None, num_workers=2, multiprocessing_context="spawn"))
    assert len(batches) == 7 and len({b.entry_id for b in batches}) == 7
    assert sorted(b.step for b in batches) == [0, 0, 1, 1, 2, 2, 3]  # 4 + 3, each worker counts its own
    assert acknowledged(loader) - before == 7


def test_an_unreachable_pipeline_is_named(pipeline_loader):
    a = pipeline_loader.address
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(ServiceUnavailable, match=rf"pool is not reachable: Redis at redis://{dead}/0"):
        SubgraphLoader.connect(f"redis://{dead}/0", a.job, a.features, a.data, connect_timeout_s=1)
    with pytest.raises(ServiceUnavailable, match=rf"feature shards are not reachable: .*{dead}"):
        SubgraphLoader.connect(a.redis_url, a.job, f"{a.features[0][0]};{dead}", a.data, trainer=a.trainer,
                               connect_timeout_s=1)


def test_a_second_embedded_pipeline_in_one_process_is_refused(pipeline_loader, loader_data):
    with pytest.raises(ConfigError, match="Ray is already initialized"):
        SubgraphLoader.embedded(loader_data)


def test_the_start_up_report_orders_the_parts_and_the_first_minibatch(pipeline_loader):
    startup = pipeline_loader.pipeline.startup
    assert {"dataset", "redis", "feature shards", "ray", "sampler workers"} <= set(startup)
    # Redis, the shards and Ray start at once after the dataset; the samplers need all three
    assert 0 <= startup["dataset"] <= min(startup["redis"], startup["feature shards"], startup["ray"])
    assert startup["sampler workers"] >= max(startup["redis"], startup["feature shards"], startup["ray"])
    loader = reader(pipeline_loader, "startup", steps=1)
    assert "first minibatch" not in loader.startup  # a connected loader counts from its own connect
    assert len(list(loader)) == 1
    assert 0 < loader.startup["first minibatch"] < 60
