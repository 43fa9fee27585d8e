"""The connections one loader iteration holds, opened as a trainer's are (:func:`saintpipe.trainer.worker.run_trainer`).

A :class:`Session` opens, in the process that iterates (the caller's, or a
DataLoader worker's): the dataset (labels, train split, degrees, and the
topology node-set entries are induced on), the job's pool, the feature client,
and a :class:`~saintpipe.trainer.feeds.PoolFeed` over them. Before its first
get it takes back what its consumer name still held unacknowledged (a
``break`` out of the previous iteration, a crashed process under the same
name), as a restarted trainer does. Closing it stops the prefetch thread,
sends the acknowledgements still queued and closes every connection (the
feature client unlinks its shared-memory regions).
"""

from __future__ import annotations

import numpy as np

from saintpipe.loader.address import PipelineAddress
from saintpipe.trainer.feeds import Item


class Session:
    """Pool, feature client and feed of one consumer; use it as a context manager.

    Args:
        address: where the pipeline is.
        consumer: this consumer's name in the job's pool (unique among its live consumers).

    Raises:
        ServiceUnavailable: Redis or a feature shard cannot be reached.
        DatasetError: the dataset directory is unreadable.
    """

    def __init__(self, address: PipelineAddress, consumer: str) -> None:
        from saintpipe.services.dataset.expand import SubgraphExpander
        from saintpipe.services.dataset.sample_graph import sampled_degrees
        from saintpipe.services.dataset.store import open_dataset
        from saintpipe.services.feature_shard.client import FeatureClient
        from saintpipe.services.pool.pool import SubgraphPool
        from saintpipe.trainer.feeds import PoolFeed
        from saintpipe.trainer.worker import take_back

        cfg = address.trainer
        self.consumer = consumer
        self.timeout_s = cfg.pool_timeout_s
        dataset = open_dataset(address.data)
        self.labels = dataset.labels
        self.train_mask = np.zeros(dataset.num_nodes, dtype=bool)
        self.train_mask[np.asarray(dataset.splits["train"])] = True
        self.num_train = int(self.train_mask.sum())
        # The self-loop degree follows the graph the samplers draw from, as a trainer's does.
        sampled = sampled_degrees(dataset, cfg.sample_graph)
        self.degrees = dataset.degrees() if sampled is None else sampled
        self._client = self._pool = self._feed = None
        try:
            self._client = FeatureClient(address.features, name=consumer, shared_memory=cfg.feature_shared_memory,
                                         retry_deadline_s=cfg.feature_retry_deadline_s,
                                         security=cfg.feature_security())
            self._pool = SubgraphPool.from_config(address.pool, url=address.redis_url)
            take_back(self._pool, consumer)
            self._feed = PoolFeed(self._pool, consumer, self._client.gather, prefetch=cfg.prefetch,
                                  expand=SubgraphExpander(dataset))
        except BaseException:
            self.close()
            raise

    def next(self) -> Item:
        """The next subgraph with its features.

        Raises:
            SaintpipeTimeout: none arrived within ``[trainer] pool_timeout_s`` (are the samplers running?).
        """
        return self._feed.next(self.timeout_s)

    def close(self) -> None:
        """Stop the prefetch thread, send queued acknowledgements, close the connections. Idempotent."""
        feed, pool, client = self._feed, self._pool, self._client
        self._feed = self._pool = self._client = None
        try:
            if feed is not None:
                feed.close()
        finally:
            try:
                if pool is not None:
                    pool.close()
            finally:
                if client is not None:
                    client.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
