"""The supervisor's choice of wire: node sets only where trainers will find the normalization they need."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.normalization import load_or_estimate
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler_service.config import SamplerServiceConfig
from saintpipe.services.sampler_service.service import SamplerService


@pytest.fixture
def dataset(tmp_path):
    write_dataset(tmp_path / "demo", **generate_demo(num_nodes=600, feature_dim=4, seed=4))
    return open_dataset(tmp_path / "demo")


def service(dataset, wire: str, resolved: str = "nodes") -> SamplerService:
    config = SamplerServiceConfig(data=dataset.path, sampler={"kind": "node", "node_budget": 50},
                                  pool={"url": "redis://127.0.0.1:1/0", "wire": wire})
    svc = SamplerService(config)
    svc._pool = SimpleNamespace(wire=resolved)  # what the service's own pool object resolved
    return svc


def test_node_sets_go_ahead_when_the_normalization_is_stored(dataset):
    svc = service(dataset, "auto")
    norm = load_or_estimate(dataset, svc.config.sampler, 6, seed=0, processes=1)
    assert svc._wire_fallback(dataset, norm) is None  # the workers' own wire: node sets through Redis
    assert service(dataset, "nodes")._wire_fallback(dataset, norm) is None
    assert svc._wire_fallback(dataset, None) is None  # no normalization: nothing to find


def test_an_unstored_normalization_falls_back_to_whole_subgraphs_or_refuses_nodes(dataset, caplog):
    unstored = Normalization(loss_coefficients=dataset.indptr[1:].astype("float32"),
                             aggregator_coefficients=dataset.indices.astype("float32"), num_subgraphs=6,
                             config_key="node-0000000000000000", seed=0)
    assert service(dataset, "auto")._wire_fallback(dataset, unstored) == "full"
    assert "could not be stored" in caplog.text
    assert service(dataset, "auto", resolved="full")._wire_fallback(dataset, unstored) is None  # shared memory
    assert service(dataset, "full")._wire_fallback(dataset, unstored) is None
    with pytest.raises(ConfigError, match="pool wire 'nodes'.*norm/node-.*'full'"):
        service(dataset, "nodes")._wire_fallback(dataset, unstored)
