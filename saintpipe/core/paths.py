"""Where saintpipe keeps data it makes for the user (the demo dataset)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """``$SAINTPIPE_HOME``, else ``~/.cache/saintpipe``."""
    return Path(os.environ.get("SAINTPIPE_HOME") or Path.home() / ".cache" / "saintpipe")


def demo_dataset_dir() -> Path:
    return home() / "datasets" / "demo"
