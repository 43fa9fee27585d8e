"""The import contracts in pyproject.toml, checked by import-linter as ./scripts/test.sh checks them.

The checkout must keep every contract, and a contract broken on purpose in a
copy of the checkout (the pool importing the command line) must fail the check
with import-linter's own message naming the import.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LINT = ROOT / "scripts" / "lint-imports.sh"


def lint(root: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "LINT_IMPORTS": str(Path(sys.executable).with_name("lint-imports"))}
    return subprocess.run(["bash", str(root / "scripts" / "lint-imports.sh")], capture_output=True, text=True,
                          env=env, timeout=120)


def copy_checkout(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("saintpipe", "services", "trainer", "scripts"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_checkout_keeps_every_contract() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


def test_the_pool_importing_the_cli_breaks_the_layers(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    module = root / "services" / "pool" / "config.py"
    module.write_text(module.read_text() + "\nfrom saintpipe.cli import main  # noqa: E402  (a broken layer, on purpose)\n")
    result = lint(root)
    assert result.returncode != 0
    assert "saintpipe.services.pool is not allowed to import saintpipe.cli" in result.stdout
    assert "saintpipe.services.pool.config -> saintpipe.cli" in result.stdout


def test_a_cycle_between_modules_breaks_the_acyclic_contract(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path)
    module = root / "services" / "pool" / "config.py"
    module.write_text(module.read_text() + "\nfrom saintpipe.services.pool import metrics  # noqa: E402,F401\n")
    metrics = root / "services" / "pool" / "metrics.py"
    metrics.write_text(metrics.read_text() + "\nfrom saintpipe.services.pool import config  # noqa: E402,F401\n")
    result = lint(root)
    assert result.returncode != 0
    assert "No cycles are allowed in saintpipe.services.pool" in result.stdout
