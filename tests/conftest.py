"""Fixtures shared by every test level."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = ROOT / "tests" / "data"


def free_port() -> int:
    """A free TCP port on loopback (bind to port 0 and read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def saintpipe_command() -> list[str]:
    """The real ``saintpipe`` console script of this environment.

    Tests run it with PYTHONPATH set to this checkout, so the code under test is
    this tree's even where the environment's editable install points elsewhere.
    """
    script = Path(sys.executable).parent / "saintpipe"
    if script.exists():
        return [str(script)]
    found = shutil.which("saintpipe")
    if found is None:
        pytest.fail("the saintpipe console script is not installed (run ./scripts/test.sh)")
    return [found]


def run_cli(*args: str, check: bool = True, timeout: float = 300, env: dict | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    proc = subprocess.run([*saintpipe_command(), *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"saintpipe {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


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
    """A private, real redis-server on a free loopback port (password, no persistence); stopped afterwards.

    Ignores SAINTPIPE_REDIS_URL so tests may restart or kill it. Use ``.url``;
    ``.restart()`` restarts it on the same port (losing its data).
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
