"""Whether Numba's cache already holds the kernels a run uses (see :mod:`saintpipe.pipeline.warmup`)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# The induction kernel every sampler calls on every subgraph (drawn whole or into a message): cached once the
# kernels have been compiled.
_PROBE_MODULE, _PROBE_KERNEL = "saintpipe.services.sampler.kernels.induce", "complete_subgraph"


def kernels_cached() -> bool:
    """Whether Numba's cache holds the samplers' kernels (a run need not compile them)."""
    spec = importlib.util.find_spec(_PROBE_MODULE)
    if spec is None or spec.origin is None:
        return False
    source = Path(spec.origin)
    root = os.environ.get("NUMBA_CACHE_DIR")
    where = Path(root) if root else source.parent / "__pycache__"
    pattern = f"{source.stem}.{_PROBE_KERNEL}-*.nbi"
    return where.is_dir() and next(where.rglob(pattern), None) is not None
