"""Fixtures of the feature-service integration tests: small datasets and real shard servers on loopback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from feature_shard_helpers import FEATURE_DIM, NUM_NODES, NUM_SHARDS, start_shards

from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.feature_shard.server import stop_server


@pytest.fixture(scope="session")
def feature_dataset(tmp_path_factory) -> Path:
    """A 3-shard demo dataset (NUM_NODES nodes x FEATURE_DIM float32 features)."""
    out = tmp_path_factory.mktemp("features") / "demo"
    write_dataset(
        out, num_shards=NUM_SHARDS, **generate_demo(num_nodes=NUM_NODES, feature_dim=FEATURE_DIM, seed=3)
    )
    return out


@pytest.fixture(scope="session")
def full_matrix(feature_dataset) -> np.ndarray:
    """The whole feature matrix, the reference every gather is compared with."""
    return np.asarray(open_dataset(feature_dataset).features())


@pytest.fixture(scope="module")
def shard_addresses(feature_dataset):
    """One in-process server per shard, default limits; yields the per-shard address lists."""
    servers, addresses = start_shards(feature_dataset)
    yield addresses
    for server in servers:
        stop_server(server, grace=1.0)


@pytest.fixture(scope="module")
def small_limit_addresses(feature_dataset):
    """Servers with a 4 KiB message limit: ~40 rows per chunk, ~500 ids per request."""
    servers, addresses = start_shards(feature_dataset, max_message_bytes=4096)
    yield addresses
    for server in servers:
        stop_server(server, grace=1.0)
