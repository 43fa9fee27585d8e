"""GraphSAINT samplers: Numba kernels, induction into CSR, normalization (see docs/sampler.md).

The public names are imported lazily, so that importing the package (the CLI
does, to register ``saintpipe bench sampler``) does not load Numba::

    from services.sampler import make_sampler, FrontierConfig
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SamplerConfig": "services.sampler.config",
    "FrontierConfig": "services.sampler.config",
    "RandomWalkConfig": "services.sampler.config",
    "EdgeConfig": "services.sampler.config",
    "NodeConfig": "services.sampler.config",
    "config_key": "services.sampler.config",
    "parse_sampler_config": "services.sampler.config",
    "Sampler": "services.sampler.sampler",
    "make_sampler": "services.sampler.sampler",
    "Normalization": "services.sampler.normalization",
    "estimate_normalization": "services.sampler.normalization",
    "load_or_estimate": "services.sampler.normalization",
    "subgraph_seed": "services.sampler.parallel",
    "run_pinned": "services.sampler.parallel",
    "measure_throughput": "services.sampler.parallel",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'services.sampler' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
