"""The trainer-side cache: pinned top-degree rows, batch-granular LRU, counts and metrics."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import REGISTRY

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.feature_shard.cache import CacheConfig, FeatureCache, top_degree_nodes

N, F = 200, 3
MATRIX = np.arange(N * F, dtype=np.float32).reshape(N, F)


def _gather(cache: FeatureCache, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the client does: look up, fetch the misses (once each), insert them."""
    out = np.full((ids.size, F), np.nan, dtype=np.float32)
    hit = cache.lookup(ids, out)
    np.testing.assert_array_equal(out[hit], MATRIX[ids[hit]])  # hits are the right rows
    missed = np.unique(ids[~hit])
    out[~hit] = MATRIX[ids[~hit]]
    cache.insert(missed, MATRIX[missed])
    return out, hit


def test_top_degree_nodes_breaks_ties_by_id():
    degrees = np.array([5, 1, 9, 5, 9, 0])
    assert top_degree_nodes(degrees, 3).tolist() == [0, 2, 4]
    assert top_degree_nodes(degrees, 0).size == 0 and top_degree_nodes(degrees, 99).size == 6


def test_static_rows_always_hit_and_are_never_evicted():
    static = np.array([3, 50, 199])
    cache = FeatureCache(N, F, static_ids=static, static_rows=MATRIX[static], lru_rows=4)
    rng = np.random.default_rng(0)
    for _ in range(30):
        _gather(cache, rng.integers(0, N, 20))
    out, hit = _gather(cache, static)
    assert hit.all()
    np.testing.assert_array_equal(out, MATRIX[static])


def test_lru_keeps_the_most_recently_used():
    # The LRU invariant at batch granularity: after every batch, each cached id was used
    # no earlier than every evicted id, the cache is full but for at most one bulk eviction
    # (an eighth of it, freed at once), and the batch just requested is cached.
    capacity = 25
    cache = FeatureCache(N, F, lru_rows=capacity)
    rng = np.random.default_rng(1)
    pool = rng.permutation(N)[:60]
    last_use: dict[int, int] = {}
    for step in range(300):
        ids = rng.choice(pool, size=int(rng.integers(1, 12)))  # duplicates allowed
        _gather(cache, ids)
        last_use.update({int(i): step for i in ids})
        cached = {i for i in last_use if cache._slot_of[i] >= 0}
        evicted = set(last_use) - cached
        assert min(capacity, len(last_use)) - capacity // 8 <= len(cached) == len(cache)
        assert len(cached) <= min(capacity, len(last_use))
        assert set(ids.tolist()) <= cached
        if evicted:
            assert max(last_use[i] for i in evicted) <= min(last_use[i] for i in cached)


def test_counts_duplicates_oversized_batches_and_metrics():
    before = REGISTRY.get_sample_value("saintpipe_feature_cache_hits_total", {"trainer": "unit"}) or 0.0
    cache = FeatureCache(N, F, lru_rows=5, name="unit")
    _gather(cache, np.array([7, 7, 8]))
    _, hit = _gather(cache, np.array([7, 8, 8, 9]))
    assert hit.tolist() == [True, True, True, False]
    assert (cache.hits, cache.misses) == (3, 4)
    assert REGISTRY.get_sample_value("saintpipe_feature_cache_hits_total", {"trainer": "unit"}) == before + 3
    _gather(cache, np.arange(100, 120))  # more new ids than slots: keeps the last five
    _, hit = _gather(cache, np.arange(100, 120))
    assert np.flatnonzero(hit).tolist() == list(range(15, 20))
    assert cache.stats()["cache_hit_rate"] == pytest.approx(8 / 47)


def test_rejects_inconsistent_static_part():
    with pytest.raises(InvalidArgument, match="shape"):
        FeatureCache(N, F, static_ids=np.array([1, 2]), static_rows=np.zeros((3, F), np.float32))
    with pytest.raises(InvalidArgument, match="unique"):
        FeatureCache(N, F, static_ids=np.array([1, 1]), static_rows=np.zeros((2, F), np.float32))
    assert not CacheConfig().enabled and CacheConfig(lru_rows=1).enabled


def test_eviction_is_in_bulk_so_a_full_cache_does_not_scan_itself_on_every_insert(monkeypatch):
    # Choosing victims passes over every LRU slot; per insert, that made a step O(cache) once it was full.
    scans = []
    argpartition = np.argpartition
    monkeypatch.setattr(np, "argpartition", lambda a, k, **kw: scans.append(a.size) or argpartition(a, k, **kw))
    capacity, inserts = 160, 2000
    cache = FeatureCache(N * 10, F, lru_rows=capacity)
    for i in range(inserts):  # one new id per batch: every insert past the first 160 evicts
        cache.insert(np.array([i], dtype=np.int64), np.zeros((1, F), np.float32))
        assert cache._slot_of[i] >= 0
    assert 0 < len(scans) <= (inserts - capacity) // (capacity // 8) + 1
    assert capacity - capacity // 8 <= len(cache) <= capacity
