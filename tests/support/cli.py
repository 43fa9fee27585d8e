"""Helpers the tests import by name: free loopback ports and the real ``saintpipe`` console script.

They live here, not in tests/conftest.py, because ``from conftest import …``
resolves to whichever conftest.py pytest imported first.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A free TCP port on loopback (bind to port 0 and read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def saintpipe_command() -> list[str]:
    """The real ``saintpipe`` console script of this environment.

    It is this checkout's: the environment's editable install maps the
    ``saintpipe`` namespace onto the checkout's folders.
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
