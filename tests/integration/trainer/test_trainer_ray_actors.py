"""Trainer actors on a real local Ray: two data-parallel trainers averaging gradients, through ``train()``."""

from __future__ import annotations

import pytest

from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.actor import merge_results, train
from saintpipe.trainer.config import ModelConfig, TrainerConfig

MODEL = ModelConfig(arch="sage", hidden=[32, 32], dropout=0.5, weight_decay=5e-4)


def test_two_data_parallel_actors_train_from_pool_and_features(
    ray_local, cora_dir, feature_addresses, producer, redis_server_session
):
    job = "trainer-ray-dp"
    config = TrainerConfig(model=MODEL, epochs=8, pool_timeout_s=30)
    with producer(job) as (pool, _):
        # train() reuses the running Ray; merge_results raises if the two trainers' weights differ.
        result = train(
            job,
            str(cora_dir),
            redis_server_session.url,
            feature_addresses,
            config,
            trainers=2,
            pool=PoolConfig(visibility_timeout=30),
        )
        acknowledged = pool.stats().acknowledged
    assert result.test_score > 0.4  # 7 classes: chance is about 0.14
    assert result.epochs == 8
    assert result.subgraphs == 2 * result.steps  # both trainers stepped together, one subgraph each
    assert acknowledged >= result.subgraphs
    assert result.times.compute > 0 and result.times.feature_fetch > 0
    assert ray_local.is_initialized()  # the facade left the caller's Ray running


def test_merge_refuses_diverged_trainers():
    from saintpipe.trainer.result import TrainResult
    from saintpipe.trainer.timing import TimeBreakdown

    def result(digest: str) -> TrainResult:
        return TrainResult(
            0.5, 0.5, 1, 1, 1, False, -1, TimeBreakdown(compute=1.0, wall=2.0), model_digest=digest
        )

    merged = merge_results([result("a"), result("a")])
    assert merged.subgraphs == 2 and merged.times.compute == 2.0 and merged.times.wall == 2.0
    with pytest.raises(RuntimeError, match="different weights"):
        merge_results([result("a"), result("b")])
