"""The documentation site's generator (docs/hooks/reference.py), loaded from its file as MkDocs loads it."""

from __future__ import annotations

import importlib.util
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
