"""Where saintpipe keeps data it makes for the user (the demo dataset, each local run's checkpoints)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def home() -> Path:
    """``$SAINTPIPE_HOME``, else ``~/.cache/saintpipe``."""
    return Path(os.environ.get("SAINTPIPE_HOME") or Path.home() / ".cache" / "saintpipe")


def demo_dataset_dir() -> Path:
    return home() / "datasets" / "demo"


def runs_dir() -> Path:
    return home() / "runs"


def new_run_dir(job: str) -> Path:
    """A fresh directory for one run of ``job``: ``runs/<job>-<local time>-<pid>``, created."""
    out = runs_dir() / f"{job}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    out.mkdir(parents=True, exist_ok=True)
    return out
