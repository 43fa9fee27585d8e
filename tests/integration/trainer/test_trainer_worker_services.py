"""One trainer in-process against the real services: Redis pool, gRPC feature shards, sampler kernels."""

from __future__ import annotations

from prometheus_client import REGISTRY

from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.config import ModelConfig, TrainerConfig
from saintpipe.trainer.assemble import TrainerSpec, run_trainer, trainer_name

MODEL = ModelConfig(arch="gcn", hidden=[32, 32], dropout=0.5, weight_decay=5e-4)


def spec(cora_dir, url, addresses, job, **cfg) -> TrainerSpec:
    return TrainerSpec(
        job=job,
        dataset_dir=str(cora_dir),
        pool_url=url,
        feature_addresses=addresses,
        config=TrainerConfig(model=MODEL, pool_timeout_s=20, **cfg),
        pool=PoolConfig(visibility_timeout=30),
    )


def test_trainer_learns_cora_from_pool_and_feature_shards(
    cora_dir, feature_addresses, producer, redis_server_session
):
    job = "trainer-it-learn"
    with producer(job, roots=400) as (pool, _):
        result = run_trainer(spec(cora_dir, redis_server_session.url, feature_addresses, job, epochs=12))
        stats = pool.stats()
    assert result.test_score > 0.6  # 7 classes: chance is about 0.14
    assert result.epochs == 12 and result.subgraphs == result.steps > 12
    assert stats.acknowledged >= result.subgraphs  # every step acknowledged its entry
    t = result.times
    assert t.compute > 0 and t.feature_fetch > 0 and t.evaluation > 0
    assert 0 <= t.data_wait <= t.wall
    name = trainer_name(job, 0)
    assert REGISTRY.get_sample_value("saintpipe_trainer_steps_total", {"trainer": name, "trial": ""}) == result.steps
    assert REGISTRY.get_sample_value("saintpipe_trainer_data_wait_seconds_total", {"trainer": name, "trial": ""}) >= 0
    assert REGISTRY.get_sample_value("saintpipe_trainer_val_score", {"trainer": name, "trial": ""}) > 0.5
    assert (
        REGISTRY.get_sample_value("saintpipe_trainer_step_seconds_count", {"trainer": name, "trial": ""}) == result.steps
    )
    # The training steps' gathers, metered apart from evaluation's (this client has no cache: all misses).
    assert result.feature_gathers >= result.subgraphs and result.feature_cache_hits == 0
    assert result.feature_bytes == result.feature_rows * 1433 * 4  # cora: 1433 float32 features per row
    # The client counts every row it was asked for: evaluation's whole-graph gather (2708 rows) is the difference.
    client_rows = REGISTRY.get_sample_value("saintpipe_feature_cache_misses_total", {"trainer": name})
    assert client_rows - result.feature_rows >= 2708
    assert REGISTRY.get_sample_value("saintpipe_trainer_feature_rows_total", {"trainer": name, "trial": ""}) == result.feature_rows
    assert REGISTRY.get_sample_value("saintpipe_trainer_feature_bytes_total", {"trainer": name, "trial": ""}) == \
        result.feature_bytes


def test_restarted_trainer_resumes_from_its_checkpoint(
    cora_dir, feature_addresses, producer, redis_server_session, tmp_path
):
    job = "trainer-it-resume"
    ckpt = tmp_path / "ckpt"
    with producer(job) as _:
        first = run_trainer(
            spec(
                cora_dir,
                redis_server_session.url,
                feature_addresses,
                job,
                epochs=100,
                max_steps=4,
                checkpoint_dir=ckpt,
                prefetch=False,
            )
        )
        second = run_trainer(
            spec(
                cora_dir,
                redis_server_session.url,
                feature_addresses,
                job,
                epochs=100,
                max_steps=7,
                checkpoint_dir=ckpt,
                prefetch=False,
            )
        )
    assert first.resumed_from_step == -1 and first.steps == 4
    assert second.resumed_from_step == 4 and second.steps == 7
    assert second.subgraphs == first.subgraphs + 3  # loop progress came back with the weights
    assert (ckpt / "latest.pt").is_file()
