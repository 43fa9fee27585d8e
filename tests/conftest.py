"""Fixtures shared by every test level."""

from __future__ import annotations

from pathlib import Path

import pytest

# Shared assertion helpers (assert_balanced): pytest rewrites their asserts as it does the tests' own, so a
# failure shows the values. Registered before anything imports them.
pytest.register_assert_rewrite("tests.support.pool")

from tests.support.cli import free_port, run_cli, saintpipe_command  # noqa: F401  (re-exported to fixtures)

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = ROOT / "tests" / "data"


@pytest.fixture
def cli():
    """Run the saintpipe console script: ``cli("data", "info", path)``."""
    return run_cli


@pytest.fixture(scope="session")
def real_datasets() -> Path:
    """The directory holding cora.npz and citeseer.npz (see tests/data/README.md)."""
    return TEST_DATA


@pytest.fixture
def shm_dir(tmp_path, monkeypatch) -> Path:
    """A private shared-memory directory for the pool's slots, so a test sees only its own."""
    from saintpipe.services.pool import shared_memory

    directory = tmp_path / "shm"
    directory.mkdir()
    monkeypatch.setattr(shared_memory, "SHM_DIR", directory)
    return directory


@pytest.fixture
def saintpipe_home(tmp_path, monkeypatch) -> Path:
    """A private SAINTPIPE_HOME so tests never touch the user's cache."""
    home = tmp_path / "saintpipe-home"
    monkeypatch.setenv("SAINTPIPE_HOME", str(home))
    return home


@pytest.fixture
def redis_server():
    """A private, real redis-server on a free loopback port (password, append-only file); stopped afterwards.

    Ignores SAINTPIPE_REDIS_URL so tests may restart or kill it. Use ``.url``;
    ``.restart()`` restarts it on the same port, from its append-only file (its data survive).
    """
    from saintpipe.services.pool.redis_server import RedisServer

    with RedisServer(use_env=False) as server:
        yield server


@pytest.fixture(scope="session")
def redis_server_session():
    """One private redis-server shared by a whole test session: do not restart or kill it; use unique keys."""
    from saintpipe.services.pool.redis_server import RedisServer

    with RedisServer(use_env=False) as server:
        yield server


# --- which tests run one at a time ---------------------------------------------------------------------------
# ./scripts/test.sh runs the suite in two phases: every test not marked `serial` on pytest-xdist workers, then
# the `serial` ones alone. Serial are the tests that need the machine's cores to themselves: a local Ray with
# sampler workers pinned to cores (each claims a core with a flock: a second service at the same time would be
# made to share one), a whole `saintpipe run` (the fault suite's timing windows, the pipeline runs),
# benchmarks, and tests of thread affinity or of network namespaces. A folder named here is serial as a whole
# (a new test in it included); a single module elsewhere says `pytestmark = pytest.mark.serial`.
SERIAL_FOLDERS = (
    "e2e/faults", "e2e/pipeline", "e2e/bench", "e2e/trainer",
    "integration/sampler_service", "integration/loader", "integration/trainer", "integration/bench",
    "integration/core",
)


def pytest_collection_modifyitems(config, items):
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        relative = Path(str(item.path)).resolve().relative_to(tests_dir).as_posix()
        if relative.startswith(tuple(f"{folder}/" for folder in SERIAL_FOLDERS)):
            item.add_marker(pytest.mark.serial)
