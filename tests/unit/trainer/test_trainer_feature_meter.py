"""FeatureMeter: the training steps' feature gathers (rows, cache hits, bytes fetched), apart from evaluation's."""

from __future__ import annotations

import threading
import time

import numpy as np
from prometheus_client import REGISTRY

from saintpipe.services.feature_shard.cache import FeatureCache
from saintpipe.trainer.actor import merge_results
from saintpipe.trainer.result import TrainResult
from saintpipe.trainer.metrics import FeatureMeter, FeatureTotals, TrainerMetrics
from saintpipe.trainer.timing import TimeBreakdown

DIM = 8


class CachedClient:
    """FeatureClient's counting, over an in-memory matrix: an LRU cache in front, misses 'fetched' as float32."""

    def __init__(self, num_nodes: int, lru_rows: int, pause_s: float = 0.0) -> None:
        self.matrix = np.arange(num_nodes * DIM, dtype=np.float32).reshape(num_nodes, DIM)
        self.cache = FeatureCache(num_nodes, DIM, lru_rows=lru_rows, name="meter-test-cache")
        self.pause_s = pause_s
        self.counters = {"rows_requested": 0, "bytes_received": 0, "shm_bytes": 0}
        self.lock = threading.Lock()

    def gather(self, ids: np.ndarray) -> np.ndarray:
        out = np.empty((ids.size, DIM), np.float32)
        hit = self.cache.lookup(ids, out)
        missing = np.unique(ids[~hit])
        time.sleep(self.pause_s)  # a gather takes a while: counters of overlapping gathers would mix
        out[~hit] = self.matrix[ids[~hit]]
        self.cache.insert(missing, self.matrix[missing])
        with self.lock:
            self.counters["rows_requested"] += ids.size
            self.counters["bytes_received"] += missing.size * DIM * 4
        return out

    def stats(self) -> dict[str, float]:
        with self.lock:
            return {**self.counters, **self.cache.stats()}


def test_training_gathers_are_counted_and_exported_evaluation_is_not():
    client = CachedClient(1000, lru_rows=300, pause_s=0.002)
    metrics = TrainerMetrics("meter-test")
    meter = FeatureMeter(client, metrics)
    batches = [np.arange(start, start + 100) for start in (0, 50, 50, 900, 0)]
    stop = threading.Event()

    def evaluate() -> None:  # the whole graph, over and over, while training gathers
        while not stop.is_set():
            np.testing.assert_array_equal(meter.gather_uncounted(np.arange(1000)), client.matrix)

    evaluation = threading.Thread(target=evaluate)
    evaluation.start()
    try:
        for ids in batches:
            np.testing.assert_array_equal(meter.gather(ids), client.matrix[ids])
            time.sleep(0.003)
    finally:
        stop.set()
        evaluation.join()
    totals = meter.totals()
    assert totals.gathers == len(batches) and totals.rows == 500
    assert 0 <= totals.cache_hits <= 500 and totals.fetched_bytes == (500 - totals.cache_hits) * DIM * 4
    assert totals.hit_rate == totals.cache_hits / 500
    assert totals.bytes_per_gather == totals.fetched_bytes / len(batches)
    # Every sample the exporter holds is the meter's own (evaluation's 1000-row gathers never leak in).
    sample = lambda name: REGISTRY.get_sample_value(name, {"trainer": "meter-test", "trial": ""})  # noqa: E731
    assert sample("saintpipe_trainer_feature_rows_total") == 500
    assert sample("saintpipe_trainer_feature_cache_hits_total") == totals.cache_hits
    assert sample("saintpipe_trainer_feature_bytes_total") == totals.fetched_bytes


def test_consecutive_overlapping_batches_show_as_hits_and_fewer_bytes():
    meter = FeatureMeter(CachedClient(1000, lru_rows=500))
    for start in range(0, 100, 10):  # each batch shares 90 of its 100 rows with the previous one
        meter.gather(np.arange(start, start + 100))
    totals = meter.totals()
    assert totals.cache_hits == 9 * 90 and totals.fetched_bytes == (100 + 9 * 10) * DIM * 4
    fresh = FeatureMeter(CachedClient(1000, lru_rows=500))
    for start in range(0, 1000, 100):  # disjoint batches: every row is fetched
        fresh.gather(np.arange(start, start + 100))
    assert fresh.totals().hit_rate == 0.0 and fresh.totals().bytes_per_gather > 5 * totals.bytes_per_gather


def test_a_group_reports_the_feature_figures_summed_over_ranks():
    def result(gathers: int, rows: int, hits: int, fetched: int) -> TrainResult:
        return TrainResult(0.9, 0.8, 1, 10, 10, False, -1, TimeBreakdown(), feature_gathers=gathers,
                           feature_rows=rows, feature_cache_hits=hits, feature_bytes=fetched)

    merged = merge_results([result(10, 1000, 600, 4000), result(12, 1100, 500, 5000)])
    assert (merged.feature_gathers, merged.feature_rows, merged.feature_cache_hits, merged.feature_bytes) == \
        (22, 2100, 1100, 9000)
    summary = merged.summary()
    assert summary["feature_cache_hit_rate"] == 1100 / 2100 and summary["feature_bytes_per_step"] == 9000 / 22
    assert np.isnan(FeatureTotals().hit_rate) and np.isnan(FeatureTotals().bytes_per_gather)
