"""Fixtures of the pool's integration tests (tests/conftest.py has ``redis_server``, which persists)."""

from __future__ import annotations

import pytest


@pytest.fixture
def volatile_redis():
    """A private redis-server without persistence: a restart empties it, as it would a Redis deployed so."""
    from saintpipe.services.pool.redis_server import RedisServer

    with RedisServer(use_env=False, persistent=False) as server:
        yield server
