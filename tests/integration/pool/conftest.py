"""Fixtures of the pool's integration tests."""

from __future__ import annotations

import pytest

from services.pool import shared_memory


@pytest.fixture
def shm_dir(tmp_path, monkeypatch):
    """A private shared-memory directory, so a test sees only its own slots."""
    directory = tmp_path / "shm"
    directory.mkdir()
    monkeypatch.setattr(shared_memory, "SHM_DIR", directory)
    return directory
