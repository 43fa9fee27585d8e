"""PipelineConfig: the services' own models composed, local defaults under file < environment < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.pipeline.config import LOCAL_WORKERS_PER_PROCESS, PipelineConfig, load_pipeline_config
from saintpipe.services.sampler.normalization import subgraph_node_bound
from saintpipe.services.sampler.config import EdgeConfig, FrontierConfig, NodeConfig, RandomWalkConfig


def test_defaults_are_the_demo_sizing():
    cfg = load_pipeline_config(environ={})
    assert cfg.pool.job_id == "local" and cfg.pool.url is None
    assert cfg.samplers.sampler == RandomWalkConfig(roots=1000, walk_length=2)
    assert cfg.trainer.model.arch == "sage" and cfg.trainer.model.hidden == [128, 128]
    assert cfg.run.data is None and cfg.run.trainers == 1


def test_file_values_merge_field_by_field_over_the_local_defaults(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[pool]\ncapacity = 8\n[trainer.model]\nlr = 0.05\n[samplers.sampler]\nroots = 50\n")
    cfg = load_pipeline_config(path, environ={})
    assert cfg.pool.capacity == 8 and cfg.pool.job_id == "local"  # the default job id survives
    assert cfg.trainer.model.lr == 0.05 and cfg.trainer.model.hidden == [128, 128]
    assert cfg.samplers.sampler == RandomWalkConfig(roots=50, walk_length=2)


def test_another_sampler_kind_does_not_inherit_the_random_walk_parameters(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("samplers:\n  sampler:\n    kind: frontier\n    frontier_size: 100\n    node_budget: 400\n")
    assert load_pipeline_config(path, environ={}).samplers.sampler == FrontierConfig(frontier_size=100,
                                                                                      node_budget=400)


def test_environment_and_data_flag_override_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[run]\ndata = '/from/file'\ntrainers = 1\n")
    cfg = load_pipeline_config(path, data=Path("/from/flag"), environ={"SAINTPIPE_RUN__TRAINERS": "2"})
    assert cfg.run.data == Path("/from/flag") and cfg.run.trainers == 2


@pytest.mark.parametrize("section", ["pool", "data", "ray_address", "metrics_port"])
def test_fields_the_runner_wires_cannot_be_set_in_the_samplers_section(tmp_path, section):
    value = {"pool": "{ capacity = 3 }", "data": "'/x'", "ray_address": "'auto'", "metrics_port": "9101"}[section]
    path = tmp_path / "run.toml"
    path.write_text(f"[samplers]\n{section} = {value}\n")
    with pytest.raises(ConfigError, match=rf"samplers\.{section} \(set it in"):
        load_pipeline_config(path, environ={})


def test_unknown_fields_are_named(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("[run]\ntrainerz = 2\n")
    with pytest.raises(ConfigError, match=r"run\.trainerz"):
        load_pipeline_config(path, environ={})


def test_sampler_service_config_carries_what_the_runner_wired():
    cfg = PipelineConfig()
    svc = cfg.sampler_service_config(Path("/d"), "redis://:pw@127.0.0.1:1/0", cpus=4, num_train=15_000)
    assert svc.data == Path("/d") and svc.pool.url == "redis://:pw@127.0.0.1:1/0" and svc.pool.job_id == "local"
    assert svc.workers == 3  # the cores the one trainer leaves
    assert svc.metrics_port == 0 and svc.sampler == cfg.samplers.sampler
    assert PipelineConfig.model_validate({"run": {"metrics": False}}).sampler_service_config(
        Path("/d"), "redis://x", 2, 100).metrics_port is None


def test_at_least_one_sampler_worker_even_when_trainers_take_every_core():
    assert PipelineConfig.model_validate({"run": {"trainers": 4}}).sampler_workers(cpus=2) == 1
    assert PipelineConfig.model_validate({"samplers": {"workers": 3}}).sampler_workers(cpus=2) == 3


def test_the_runs_workers_share_one_process_unless_set():
    # All on this one host: one interpreter for all of them (up to the cap), unless the user wants isolation.
    svc = PipelineConfig().sampler_service_config(Path("/d"), "redis://x", cpus=4, num_train=100)
    assert svc.workers == 3 and svc.workers_per_process == 3
    many = PipelineConfig.model_validate({"samplers": {"workers": LOCAL_WORKERS_PER_PROCESS + 3}})
    assert many.sampler_service_config(Path("/d"), "redis://x", 2, 100).workers_per_process == \
        LOCAL_WORKERS_PER_PROCESS
    isolated = load_pipeline_config(environ={"SAINTPIPE_SAMPLERS__WORKERS_PER_PROCESS": "1"})
    assert isolated.sampler_service_config(Path("/d"), "redis://x", 4, 100).workers_per_process == 1


def test_normalization_presamples_follow_the_coverage_unless_set():
    def presamples(cfg: PipelineConfig, num_train: int) -> int | None:
        return cfg.sampler_service_config(Path("/d"), "redis://x", 2, num_train).norm_subgraphs

    cfg = PipelineConfig()  # 1000 roots x 3 nodes per walk = 3000 nodes at most per subgraph
    assert presamples(cfg, num_train=15_000) == 500  # 100 x 15,000 / 3,000
    assert presamples(cfg, num_train=300) == 100  # a subgraph cannot exceed the training set
    assert presamples(PipelineConfig.model_validate({"samplers": {"norm_subgraphs": 7}}), 15_000) == 7


def test_subgraph_node_bounds():
    assert subgraph_node_bound(RandomWalkConfig(roots=10, walk_length=4)) == 50
    assert subgraph_node_bound(EdgeConfig(edge_budget=7)) == 14
    assert subgraph_node_bound(NodeConfig(node_budget=9)) == 9
    assert subgraph_node_bound(FrontierConfig(frontier_size=5, node_budget=20)) == 20


def test_feature_cache_default_scales_with_the_graph():
    assert PipelineConfig().feature_cache_rows(1000).model_dump() == {"static_rows": 100, "lru_rows": 200}
    explicit = PipelineConfig.model_validate({"feature_cache": {"static_rows": 0, "lru_rows": 0}})
    assert not explicit.feature_cache_rows(1000).enabled


def test_ray_gets_enough_logical_cpus_for_every_actor():
    two_cores = {"ray_num_cpus": 2}
    assert PipelineConfig.model_validate({"run": two_cores}).ray_cpus() == 2  # 1 sampler + 1 trainer
    assert PipelineConfig.model_validate({"run": {**two_cores, "trainers": 2}}).ray_cpus() == 3
    assert PipelineConfig.model_validate({"run": two_cores, "samplers": {"workers": 4}}).ray_cpus() == 5
