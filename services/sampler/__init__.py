"""GraphSAINT samplers: Numba kernels, induction into CSR, normalization estimation (see
docs/explanation/sampler.md).

The kernels layer: pure numpy/Numba over arrays, no dataset files and no
transport. (Normalization stored with a dataset, ``load_or_estimate``, is
:mod:`saintpipe.services.dataset.normalization`; ``saintpipe bench kernels`` is
:mod:`saintpipe.bench.kernels`.)

The public names are imported lazily, so that importing the package does not load Numba::

    from saintpipe.services.sampler import make_sampler, FrontierConfig

Modules: ``config`` (one pydantic model per sampler), ``sampler`` (the facade: ``make_sampler``,
``sample(seed)``), ``graph`` (checking the graph a sampler is given), ``kernels`` (the Numba kernels,
one module per sampler, and induction), ``parallel`` (one pinned worker per core, seeds),
``coefficients`` (``Normalization``, what a sampler applies), ``normalization`` (estimating it by
pre-sampling), ``inclusion`` (closed-form inclusion probabilities), ``online`` and ``smoothed`` (the
online and smoothed estimators), ``online_shared`` (online state shared by a host's workers under
``/dev/shm``) and ``reference`` (plain implementations: the tests' oracles, the benchmark's baselines).
"""

from __future__ import annotations

from saintpipe.core.lazy import lazy_exports

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (saintpipe.core.lazy)
if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.services.sampler.coefficients import Normalization
    from saintpipe.services.sampler.config import (
        EdgeConfig,
        FrontierConfig,
        NodeConfig,
        RandomWalkConfig,
        SamplerConfig,
        config_key,
        parse_sampler_config,
    )
    from saintpipe.services.sampler.normalization import estimate_normalization
    from saintpipe.services.sampler.parallel import chain_key, measure_throughput, run_pinned, subgraph_seed
    from saintpipe.services.sampler.sampler import Sampler, make_sampler

__all__ = [
    "EdgeConfig", "FrontierConfig", "NodeConfig", "Normalization", "RandomWalkConfig", "Sampler",
    "SamplerConfig", "chain_key", "config_key", "estimate_normalization", "make_sampler",
    "measure_throughput", "parse_sampler_config", "run_pinned", "subgraph_seed"
]

__getattr__, __dir__ = lazy_exports(__name__)
