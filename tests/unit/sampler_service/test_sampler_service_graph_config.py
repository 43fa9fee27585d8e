"""``[samplers] graph``: file < environment < flag, and ``auto`` follows the dataset's manifest."""

from __future__ import annotations

import argparse

import pytest

from saintpipe.core.config import load_config
from saintpipe.core.errors import ConfigError
from saintpipe.pipeline.config import load_pipeline_config
from saintpipe.services.dataset.sample_graph import resolve_graph
from saintpipe.services.sampler_service import cli
from saintpipe.services.sampler_service.config import SECTION, SamplerServiceConfig


@pytest.mark.parametrize(("choice", "manifest", "resolved"), [
    ("auto", "full", "full"), ("auto", "train", "train"),  # auto: the dataset's own protocol
    ("full", "train", "full"), ("train", "full", "train"),  # an explicit choice wins
])
def test_auto_follows_the_manifest_and_an_explicit_choice_wins(tmp_path, choice, manifest, resolved):
    config = SamplerServiceConfig(data=tmp_path, graph=choice)
    assert resolve_graph(config.graph, manifest) == resolved


def test_the_default_is_auto_and_other_values_are_refused(tmp_path):
    assert SamplerServiceConfig(data=tmp_path).graph == "auto"
    with pytest.raises(ConfigError, match=r"graph"):
        load_config(SamplerServiceConfig, None, {"data": tmp_path, "graph": "test"}, environ={}, section=SECTION)
    with pytest.raises(ConfigError, match=r"not one of auto, full, train"):
        resolve_graph("inductive", "full")


def test_file_then_environment_then_flag(tmp_path):
    path = tmp_path / "samplers.toml"
    path.write_text('[samplers]\ngraph = "train"\n')
    assert load_config(SamplerServiceConfig, path, {"data": tmp_path}, environ={}, section=SECTION).graph == "train"
    env = {"SAINTPIPE_SAMPLERS__GRAPH": "full"}
    assert load_config(SamplerServiceConfig, path, {"data": tmp_path}, environ=env, section=SECTION).graph == "full"
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["samplers", "--data", str(tmp_path), "--graph", "train"])
    assert load_config(SamplerServiceConfig, path, {"data": args.data, "graph": args.graph}, environ=env,
                       section=SECTION).graph == "train"
    with pytest.raises(SystemExit):
        parser.parse_args(["samplers", "--graph", "inductive"])


def test_saintpipe_run_passes_the_section_to_its_samplers(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[samplers]\ngraph = "train"\n')
    config = load_pipeline_config(path, environ={})
    assert config.samplers.graph == "train"
    service = config.sampler_service_config(tmp_path, "redis://127.0.0.1:1/0", cpus=2, num_train=100)
    assert service.graph == "train"
    assert load_pipeline_config(environ={"SAINTPIPE_SAMPLERS__GRAPH": "full"}).samplers.graph == "full"
