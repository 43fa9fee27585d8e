"""The feature-shard service: node features served over gRPC by contiguous node-range shards.

Hybrid partitioning (FastSample, section 3.3): the small topology is
replicated on every host, only the large feature matrix is sharded. Each shard
server owns one contiguous node range ([start, stop)) of the features, memory
mapped from its shard file; :class:`~saintpipe.services.feature_shard.client.FeatureClient`
splits a request by range, asks the shards concurrently and reassembles the
rows in request order, optionally through a trainer-side cache
(:mod:`saintpipe.services.feature_shard.cache`).

The public names import from the package; they load on first use, so importing the package loads
neither gRPC nor numpy::

    from saintpipe.services.feature_shard import FeatureClient, create_server

Modules. Server: ``server`` (the gRPC servicer, ``create_server``, ``stop_server``), ``parse``
(requests from raw bytes, errors naming the field), ``auth`` (the token check), ``security`` (TLS and
token settings), ``lograte`` (rate-limited failure log), ``config`` (``FeatureShardConfig``), ``cli``
(``saintpipe serve feature-shard``) and ``launch`` (local shard subprocesses, restarts). Client:
``client`` (``FeatureClient``), ``replicas`` (failover and retries), ``cache`` (static + LRU row cache,
``CacheConfig``), ``ranges`` (pure id routing), ``addresses`` (shard address lists), ``scatter``
(received rows to their places, without the GIL). Both sides: ``wire`` (payload encoding), ``half``
(float16 transfer), ``shm`` (same-host shared-memory regions for answers), ``bulk_wire``,
``bulk_socket``, ``bulk_server`` and ``bulk_client`` (the bulk data plane: rows as one TCP stream) and
``metrics`` (``saintpipe bench features`` is :mod:`saintpipe.bench.features`). A gather's shard calls go
through ``transports`` (shared memory, the bulk plane, one message, a stream).
"""

from __future__ import annotations

from saintpipe.core.lazy import lazy_exports

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (saintpipe.core.lazy)
if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.services.feature_shard.cache import CacheConfig
    from saintpipe.services.feature_shard.client import FeatureClient
    from saintpipe.services.feature_shard.config import FeatureShardConfig
    from saintpipe.services.feature_shard.server import create_server, stop_server

__all__ = ["CacheConfig", "FeatureClient", "FeatureShardConfig", "create_server", "stop_server"]
__getattr__, __dir__ = lazy_exports(__name__)
