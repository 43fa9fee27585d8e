"""The feature-shard service: node features served over gRPC by contiguous node-range shards.

Hybrid partitioning (FastSample, section 3.3): the small topology is
replicated on every host, only the large feature matrix is sharded. Each shard
server owns one contiguous node range ([start, stop)) of the features, memory
mapped from its shard file; :class:`saintpipe.services.feature_shard.client.FeatureClient`
splits a request by range, asks the shards concurrently and reassembles the
rows in request order, optionally through a trainer-side cache
(:mod:`saintpipe.services.feature_shard.cache`).

Modules: ``server`` (gRPC servicer, ``create_server``), ``parse`` (requests
from raw bytes, errors naming the field), ``lograte`` (rate-limited failure
log), ``client`` (``FeatureClient``), ``replicas`` (failover and retries),
``cache`` (static + LRU row cache), ``ranges`` (pure id routing),
``addresses`` (shard address lists and manifests), ``shm`` (same-host
shared-memory regions for answers), ``wire`` (payload encoding), ``metrics``,
``config``, ``launch`` (local shard subprocesses, restarts), ``cli`` and
``bench``.
"""
