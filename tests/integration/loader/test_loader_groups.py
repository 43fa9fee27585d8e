"""Loaders in consumer groups of their own (``SubgraphLoader.connect(..., group=NAME)``) on one embedded pipeline
whose groups were registered before its samplers started: each sees the very same entries, in the same order."""

from __future__ import annotations

from saintpipe.core.config import deep_merge
from saintpipe.loader import SubgraphLoader
from saintpipe.loader.embedded import EmbeddedPipeline
from saintpipe.pipeline.config import PipelineConfig
from saintpipe.services.pool.pool import SubgraphPool

from tests.integration.loader.conftest import overrides, unique_job


def test_two_loaders_in_two_groups_see_the_same_entries(loader_data):
    config = PipelineConfig.model_validate(deep_merge(overrides(unique_job("groups")), {"run": {"data": loader_data}}))
    with EmbeddedPipeline(config, groups=["trial-a", "trial-b"]) as pipeline:
        cfg = pipeline.config
        trainer = cfg.trainer.model_copy(update={"feature_token_file": pipeline.feature_token_file})
        loaders = [SubgraphLoader.connect(pipeline.redis_url, cfg.pool.job_id, pipeline.endpoints.shards,
                                          pipeline.data_dir, trainer=trainer, pool=cfg.pool, name=f"reader-{g}",
                                          group=g, steps=6) for g in ("trial-a", "trial-b")]
        seen = [[batch.node_ids.cpu().numpy().tolist() for batch in loader] for loader in loaders]
        assert len(seen[0]) == 6 and seen[0] == seen[1]  # one stream, both groups, the same order
        with SubgraphPool.from_config(cfg.pool, url=pipeline.redis_url) as pool:
            assert pool.groups() == ["trial-a", "trial-b"]
            for group in ("trial-a", "trial-b"):
                stats = pool.stats(group=group)
                assert stats.acknowledged == 6
                assert stats.produced == stats.acknowledged + stats.depth + stats.pending + stats.dead_lettered
        for loader in loaders:
            loader.close()
