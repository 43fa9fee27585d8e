"""Where saintpipe keeps data it makes for the user (the demo dataset, each local run's run directory)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def home() -> Path:
    """``$SAINTPIPE_HOME``, else ``~/.cache/saintpipe``."""
    return Path(os.environ.get("SAINTPIPE_HOME") or Path.home() / ".cache" / "saintpipe")


def demo_dataset_dir() -> Path:
    return home() / "datasets" / "demo"


def new_run_dir(job: str, parent: Path | None = None) -> Path:
    """A fresh directory for one run of ``job``: ``runs/<local time>-<job>``, created.

    The time comes first (``20250131-142501``) so a listing sorts the runs by when they started; a run started
    in the same second as another gets ``-2``, ``-3``, ... (the directory is created exclusively: no two runs
    ever share one).
    """
    parent = home() / "runs" if parent is None else parent
    parent.mkdir(parents=True, exist_ok=True)
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{job}"
    for n in range(1, 10_000):
        out = parent / (stem if n == 1 else f"{stem}-{n}")
        try:
            out.mkdir()
            return out
        except FileExistsError:
            continue
    raise FileExistsError(f"{parent / stem}: 10,000 runs started in one second")
