"""The trainer-side cache in front of real shards: same answers, fewer fetched rows."""

from __future__ import annotations

import numpy as np
import pytest
from feature_shard_helpers import NUM_NODES
from prometheus_client import REGISTRY

from saintpipe.core.errors import ConfigError
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.feature_shard.cache import CacheConfig, top_degree_nodes
from saintpipe.services.feature_shard.client import FeatureClient


def _metric(name: str, trainer: str) -> float:
    return REGISTRY.get_sample_value(name, {"trainer": trainer}) or 0.0


def test_overlapping_batches_hit_the_cache(shard_addresses, full_matrix, feature_dataset):
    degrees = open_dataset(feature_dataset).degrees()
    config = CacheConfig(static_rows=100, lru_rows=600)
    rng = np.random.default_rng(11)
    with (
        FeatureClient(shard_addresses, cache=config, degrees=degrees, name="cache-test") as client,
        FeatureClient(shard_addresses) as uncached,
    ):
        fetched_at_start = client.stats()["rows_fetched"]
        assert fetched_at_start == 100  # the static part, fetched once
        hub = int(top_degree_nodes(degrees, 1)[0])
        window = rng.permutation(NUM_NODES)[:500]
        requested = 0
        for step in range(10):
            # Consecutive batches share most nodes (dependent minibatches), plus the top hub.
            fresh = rng.integers(0, NUM_NODES, 50)
            ids = np.concatenate([window[step * 5 : step * 5 + 400], fresh, [hub, hub]])
            rng.shuffle(ids)
            np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
            np.testing.assert_array_equal(uncached.gather(ids), full_matrix[ids])
            requested += ids.size
        stats = client.stats()
        # The cache cut the rows that crossed the network to under half of what a cacheless client fetched.
        assert stats["rows_fetched"] - fetched_at_start < 0.5 * uncached.stats()["rows_fetched"]
        assert stats["cache_hits"] + stats["cache_misses"] == requested
        assert stats["cache_hit_rate"] > 0.6
        assert stats["rows_fetched"] - fetched_at_start <= stats["cache_misses"]  # misses fetched once each
        assert _metric("saintpipe_feature_cache_hits_total", "cache-test") == stats["cache_hits"]
        assert _metric("saintpipe_feature_cache_misses_total", "cache-test") == stats["cache_misses"]


def test_cache_never_changes_answers_under_eviction(shard_addresses, full_matrix, feature_dataset):
    degrees = open_dataset(feature_dataset).degrees()
    rng = np.random.default_rng(5)
    with FeatureClient(
        shard_addresses, cache=CacheConfig(static_rows=7, lru_rows=50), degrees=degrees
    ) as client:
        for _ in range(25):  # far more distinct ids than slots: constant eviction
            ids = rng.integers(0, NUM_NODES, int(rng.integers(1, 300)))
            np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
        assert client.stats()["cache_lru_rows"] == 50


def test_static_part_needs_degrees(shard_addresses):
    with pytest.raises(ConfigError, match="degrees"):
        FeatureClient(shard_addresses, cache=CacheConfig(static_rows=10))
    with FeatureClient(shard_addresses, cache=CacheConfig(lru_rows=10)) as client:  # LRU only is fine
        client.gather(np.array([1, 1, 2]))  # misses within one batch are fetched once, cached after it
        client.gather(np.array([2, 3]))
        stats = client.stats()
        assert (stats["cache_hits"], stats["cache_misses"], stats["rows_fetched"]) == (1, 4, 3)


def test_without_a_cache_every_row_is_a_miss_in_the_metrics_too(shard_addresses, full_matrix):
    # The dashboard's hit-rate panel then reads 0 for a cacheless trainer instead of showing no data.
    with FeatureClient(shard_addresses, name="no-cache-test") as client:
        assert REGISTRY.get_sample_value("saintpipe_feature_cache_hits_total", {"trainer": "no-cache-test"}) == 0.0
        ids = np.array([3, 3, 9, 1])
        np.testing.assert_array_equal(client.gather(ids), full_matrix[ids])
        stats = client.stats()
        assert (stats["cache_hits"], stats["cache_misses"]) == (0, 4)
        assert _metric("saintpipe_feature_cache_misses_total", "no-cache-test") == 4
        assert _metric("saintpipe_feature_cache_hits_total", "no-cache-test") == 0
