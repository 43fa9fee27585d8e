"""GraphSAINT samplers: Numba kernels, induction into CSR, normalization estimation (see docs/sampler.md).

The kernels layer: pure numpy/Numba over arrays, no dataset files and no
transport. (Normalization stored with a dataset, ``load_or_estimate``, is
:mod:`saintpipe.services.dataset.normalization`; ``saintpipe bench kernels`` is
:mod:`saintpipe.bench.kernels`.)

The public names are imported lazily, so that importing the package does not load Numba::

    from saintpipe.services.sampler import make_sampler, FrontierConfig
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SamplerConfig": "saintpipe.services.sampler.config",
    "FrontierConfig": "saintpipe.services.sampler.config",
    "RandomWalkConfig": "saintpipe.services.sampler.config",
    "EdgeConfig": "saintpipe.services.sampler.config",
    "NodeConfig": "saintpipe.services.sampler.config",
    "config_key": "saintpipe.services.sampler.config",
    "parse_sampler_config": "saintpipe.services.sampler.config",
    "Sampler": "saintpipe.services.sampler.sampler",
    "make_sampler": "saintpipe.services.sampler.sampler",
    "Normalization": "saintpipe.services.sampler.coefficients",
    "estimate_normalization": "saintpipe.services.sampler.normalization",
    "subgraph_seed": "saintpipe.services.sampler.parallel",
    "chain_key": "saintpipe.services.sampler.parallel",
    "run_pinned": "saintpipe.services.sampler.parallel",
    "measure_throughput": "saintpipe.services.sampler.parallel",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'saintpipe.services.sampler' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
