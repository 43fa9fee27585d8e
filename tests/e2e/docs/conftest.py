"""The documentation site's generator (docs/hooks/reference.py), loaded from its file as MkDocs loads it, and the
site built with --strict once per session."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def reference():
    spec = importlib.util.spec_from_file_location("saintpipe_docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def table_row():
    """``table_row(page, anchor, first_cell)``: the first table row after the heading ``{#anchor}`` whose first
    cell is ``first_cell``."""

    def find(page: str, anchor: str, first_cell: str) -> str:
        section = page[page.index("{#" + anchor + "}"):]
        return next(line for line in section.splitlines() if line.startswith(f"| {first_cell} |"))

    return find


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The site as ./scripts/docs.sh builds it (mkdocs build --strict), in a temporary folder, once per session
    (per pytest-xdist worker): the build takes some 15 s."""
    work = tmp_path_factory.mktemp("docs-build")
    site = work / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    started = time.monotonic()
    # Its own time limit, under pytest's 300 s, so that a hung build says so.
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        cwd=work, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    print(f"mkdocs build --strict: {time.monotonic() - started:.1f} s")
    return site
