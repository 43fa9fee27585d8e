"""The connections one loader iteration holds, opened as a trainer's are (:class:`saintpipe.minibatch.inputs.PoolInputs`).

A :class:`Session` opens, in the process that iterates (the caller's, or a DataLoader worker's): the dataset
(labels, train split, degrees, and the topology node-set entries are induced on), the job's pool, the feature
client, and a :class:`~saintpipe.minibatch.feed.PoolFeed` over them. Before its first get it takes back what
its consumer name still held unacknowledged (a ``break`` out of the previous iteration, a crashed process
under the same name), as a restarted trainer does. Closing it stops the prefetch thread, sends the
acknowledgements still queued and closes every connection (the feature client unlinks its shared-memory
regions).
"""

from __future__ import annotations

import numpy as np

from saintpipe.loader.address import PipelineAddress
from saintpipe.minibatch.feed import Item


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
        from saintpipe.minibatch.inputs import PoolInputs
        from saintpipe.services.dataset.sample_graph import sampled_degrees
        from saintpipe.services.dataset.store import open_dataset

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
        self._inputs: PoolInputs | None = PoolInputs(dataset, consumer=consumer, features=address.features,
                                                     pool=address.pool, redis_url=address.redis_url,
                                                     group=address.group, **cfg.feed_options())
        try:
            self._inputs.start_feed()
        except BaseException:
            self.close()
            raise

    def next(self) -> Item:
        """The next subgraph with its features.

        Raises:
            SaintpipeTimeout: none arrived within ``[trainer] pool_timeout_s`` (are the samplers running?).
        """
        feed = self._inputs.feed if self._inputs is not None else None
        if feed is None:  # closed (what `None.feed` raised before)
            raise AttributeError("this Session was closed: it has no feed")
        return feed.next(self.timeout_s)

    def close(self) -> None:
        """Stop the prefetch thread, send queued acknowledgements, close the connections. Idempotent."""
        inputs, self._inputs = self._inputs, None
        if inputs is not None:
            inputs.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
