"""The sampler service: pinned Ray actors that fill the pool with subgraphs (see
docs/explanation/sampler-service.md).

The public names import from the package; they load on first use, so importing the package loads
neither Ray nor Numba::

    from saintpipe.services.sampler_service import SamplerService, SamplerServiceConfig

Modules: ``service`` (the supervisor: ``SamplerService``, starts the workers, keeps them running,
serves their metrics), ``config`` (``SamplerServiceConfig``, section ``samplers``), ``worker`` (one
worker: a Ray actor pinned to one core), ``production`` (a worker's loop: draw, push, count),
``pinning`` (which core a worker binds to), ``counters`` and ``slots`` (what a worker counts, and the
supervisor's record of each worker index), ``sequence`` (sequence numbers that survive restarts),
``normalization`` (computed, estimated by the workers, or stored), ``metrics`` (the host's Prometheus
endpoint), ``cli`` (``saintpipe serve samplers``). Its benchmarks (``saintpipe bench sampler-service``,
``kernels``) are in :mod:`saintpipe.bench`.
"""

from __future__ import annotations

from saintpipe.core.lazy import lazy_exports

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (saintpipe.core.lazy)
if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.services.sampler_service.config import SamplerServiceConfig
    from saintpipe.services.sampler_service.service import SamplerService, ServiceStats, WorkerStats

__all__ = ["SamplerService", "SamplerServiceConfig", "ServiceStats", "WorkerStats"]
__getattr__, __dir__ = lazy_exports(__name__)
