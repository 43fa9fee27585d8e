"""Normalization coefficients stored with a dataset: written atomically, reused only with the same settings."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from saintpipe.services.dataset import normalization as stored_norm
from saintpipe.services.dataset.normalization import (
    load_normalization,
    load_or_estimate,
    load_stored,
    norm_dir,
    store_normalization,
)
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.sampler.config import RandomWalkConfig, config_key
from saintpipe.services.sampler.normalization import estimate_normalization
from saintpipe.services.sampler.sampler import make_sampler

CONFIG = RandomWalkConfig(roots=4, walk_length=2, clip_multiple=4)
NUM = 12


def _must_not_sample(*args, **kwargs):
    raise AssertionError("the stored normalization should have been reused")


def test_stored_with_the_dataset_and_reused(tiny_dataset, monkeypatch):
    dataset = open_dataset(tiny_dataset)
    first = load_or_estimate(tiny_dataset, CONFIG, NUM, processes=1)
    where = norm_dir(tiny_dataset, CONFIG)
    assert where == tiny_dataset / "norm" / config_key(CONFIG)
    assert os.stat(where).st_mode & 0o777 == 0o755
    meta = json.loads((where / "meta.json").read_text())
    assert meta["num_subgraphs"] == NUM and meta["config"]["kind"] == "random_walk"
    assert not list((tiny_dataset / "norm").glob(".*")), "no temporary directory left behind"
    # The kernels' estimate for the dataset's train split (checked against brute force in tests/unit/sampler).
    expected = estimate_normalization(dataset.indptr, dataset.indices, CONFIG, num_subgraphs=NUM,
                                      train_nodes=dataset.splits["train"], processes=1)
    assert np.array_equal(first.loss_coefficients, expected.loss_coefficients)
    assert np.array_equal(first.aggregator_coefficients, expected.aggregator_coefficients)

    monkeypatch.setattr(stored_norm, "estimate_normalization", _must_not_sample)
    again = load_or_estimate(dataset, CONFIG, NUM, processes=1)
    # Mapped, not read: a plain array over the file's map (so that pickling sends it out-of-band).
    assert isinstance(again.aggregator_coefficients.base, np.memmap)
    assert np.array_equal(again.aggregator_coefficients, first.aggregator_coefficients)
    # Another subgraph count, seed or training set is another estimate.
    with pytest.raises(AssertionError, match="reused"):
        load_or_estimate(dataset, CONFIG, NUM + 1, processes=1)
    with pytest.raises(AssertionError, match="reused"):
        load_or_estimate(dataset, CONFIG, NUM, seed=1, processes=1)
    with pytest.raises(AssertionError, match="reused"):
        load_or_estimate(dataset, CONFIG, NUM, train_nodes=dataset.splits["val"], processes=1)


def test_a_new_estimate_replaces_the_stored_one(tiny_dataset):
    dataset = open_dataset(tiny_dataset)
    load_or_estimate(dataset, CONFIG, NUM, processes=1)
    assert load_stored(dataset, CONFIG, NUM + 1, 0) is None
    load_or_estimate(dataset, CONFIG, NUM + 1, processes=1)
    norm, meta = load_normalization(norm_dir(tiny_dataset, CONFIG))
    assert norm.num_subgraphs == meta["num_subgraphs"] == NUM + 1
    assert load_stored(dataset, CONFIG, NUM, 0) is None
    assert sorted(p.name for p in (tiny_dataset / "norm").iterdir()) == [config_key(CONFIG)]


def test_unreadable_copy_is_estimated_again(tiny_dataset):
    dataset = open_dataset(tiny_dataset)
    load_or_estimate(dataset, CONFIG, NUM, processes=1)
    (norm_dir(tiny_dataset, CONFIG) / "aggregator_coefficients.npy").write_bytes(b"not npy")
    assert load_stored(dataset, CONFIG, NUM, 0) is None
    norm = load_or_estimate(dataset, CONFIG, NUM, processes=1)
    assert norm.aggregator_coefficients.shape == (dataset.num_edges,)
    assert load_stored(dataset, CONFIG, NUM, 0) is not None


def test_read_only_dataset_gets_an_unsaved_estimate(tiny_dataset, monkeypatch):
    dataset = open_dataset(tiny_dataset)

    def read_only(*args, **kwargs):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(stored_norm, "save_normalization", read_only)
    norm = estimate_normalization(dataset.indptr, dataset.indices, CONFIG, num_subgraphs=NUM, processes=1)
    assert store_normalization(dataset, CONFIG, norm) is False
    assert load_or_estimate(dataset, CONFIG, NUM, processes=1).num_subgraphs == NUM
    assert not (tiny_dataset / "norm").exists()


def test_sampler_uses_stored_normalization(tiny_dataset):
    dataset = open_dataset(tiny_dataset)
    train = dataset.splits["train"]
    norm = load_or_estimate(tiny_dataset, CONFIG, NUM, processes=1)
    sampler = make_sampler(CONFIG, dataset.indptr, dataset.indices, normalization=norm, train_nodes=train)
    g = sampler.sample(3)
    expected = np.where(np.isin(g.node_ids, train), norm.loss_coefficients[g.node_ids], 0)
    assert np.array_equal(g.loss_weights, expected)


def test_a_loaded_normalization_pickles_its_arrays_out_of_band(tiny_dataset):
    # Ray's object store sends out-of-band buffers zero-copy; an np.memmap would go in-band, and every sampler
    # worker would unpickle a private copy of the per-edge coefficients.
    import pickle

    load_or_estimate(tiny_dataset, CONFIG, 5, seed=0)
    norm, _ = load_normalization(norm_dir(tiny_dataset, CONFIG))
    buffers = []
    payload = pickle.dumps(norm, protocol=5, buffer_callback=buffers.append)
    assert sum(memoryview(b).nbytes for b in buffers) == (norm.loss_coefficients.nbytes
                                                            + norm.aggregator_coefficients.nbytes)
    assert len(payload) < 4096
    assert not norm.aggregator_coefficients.flags.writeable  # still the read-only map of the stored file
