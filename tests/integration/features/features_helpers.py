"""Helpers of the feature-service integration tests (a uniquely named module, imported by the tests)."""

from __future__ import annotations

from pathlib import Path

from services.dataset.store import open_dataset
from services.feature_shard.server import create_server

NUM_NODES = 3001
NUM_SHARDS = 3
FEATURE_DIM = 24


def start_shards(dataset: Path, **kwargs) -> tuple[list, list[list[str]]]:
    servers = [create_server(dataset, k, **kwargs) for k in range(open_dataset(dataset).manifest.num_shards)]
    return [s for s, _ in servers], [[f"127.0.0.1:{port}"] for _, port in servers]
