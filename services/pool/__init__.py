"""The subgraph pool: sampled subgraphs buffered in a Redis stream between samplers and trainers
(docs/explanation/pool.md).

The public names import from the package; they load on first use, so importing the package loads
neither redis-py nor Numba::

    from saintpipe.services.pool import SubgraphPool, RedisServer

Modules. The pool object: ``pool`` (``SubgraphPool``, the facade), ``records`` (``PoolEntry``,
``PoolStats``, ``DeadLetter``), ``keys`` (a job's Redis key names), ``acks``, ``scripts`` (the ``*.lua``
scripts beside the modules), ``link``, ``deadletter``, ``slots``, ``producer``, ``consumer``,
``accounting`` (docs/explanation/pool.md, *Modules of a pool object*), ``config`` (``PoolConfig``),
``connection`` (Redis clients, ``ReconnectPolicy``), ``resp`` (lean pipelined round trips), ``shared_memory`` (the
same-host transport: slots under ``/dev/shm``) and ``metrics``. The codec, a sub-package: ``codec``
(``encode_subgraph``, ``decode_subgraph``) with ``codec.decoder``, ``codec.compact`` (node sets, format
version 2), ``codec.schema``, ``codec.scan``, ``codec.fused``, ``codec.validate`` and ``codec.xxh3``. Around it: ``redis_server``
(``RedisServer``) and ``synthetic`` (random subgraphs; ``saintpipe bench pool`` is
:mod:`saintpipe.bench.pool`).
"""

from __future__ import annotations

from saintpipe.core.lazy import lazy_exports

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (saintpipe.core.lazy)
if TYPE_CHECKING:  # pragma: no cover
    from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph
    from saintpipe.services.pool.config import PoolConfig
    from saintpipe.services.pool.connection import ReconnectPolicy
    from saintpipe.services.pool.pool import PreparedPut, SubgraphPool
    from saintpipe.services.pool.records import DeadLetter, PoolEntry, PoolStats
    from saintpipe.services.pool.redis_server import RedisServer

__all__ = [
    "DeadLetter", "PoolConfig", "PoolEntry", "PoolStats", "PreparedPut", "ReconnectPolicy", "RedisServer",
    "SubgraphPool", "decode_subgraph", "encode_subgraph"
]
__getattr__, __dir__ = lazy_exports(__name__)
