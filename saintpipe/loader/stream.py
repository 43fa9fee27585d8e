"""``SubgraphLoader``: the pipeline's subgraphs as a torch ``IterableDataset`` of :class:`Minibatch` es.

Each iteration takes subgraphs from the job's pool exactly as a trainer does
(:class:`~saintpipe.minibatch.feed.PoolFeed`: the next subgraph and its features
are fetched on a background thread while the caller's step computes; node-set
entries are induced again over the dataset's topology by
:class:`~saintpipe.minibatch.expand.SubgraphExpander`), gathers the
features from the shards (through same-host shared memory where it can) and
yields one :class:`~saintpipe.loader.minibatch.Minibatch` per subgraph.

Acknowledgement, at least once as for trainers: a minibatch is acknowledged when the caller asks for the next
one (its step is done) or when a bounded iteration ends after it. One the caller never came back from (a
``break``, an exception, a crash) is not: it goes to the pool's other consumers after the visibility timeout,
and at once to the next iteration under the same consumer name (``<job>-<name>``), which starts by taking back
what its name held.

``DataLoader(loader, batch_size=None)`` works as is. With ``num_workers=k > 0`` each worker process iterates
on its own connections under the consumer name ``<job>-<name>-w<i>`` with its share of ``steps`` / ``epochs``;
a worker acknowledges a minibatch when it moves on to the next, which the DataLoader's prefetching does before
your step used it, so up to ``k * prefetch_factor`` acknowledged minibatches may be lost with a crash
(harmless for GraphSAINT's random subgraphs, but not at-least-once). Use ``multiprocessing_context="spawn"``
(or ``"forkserver"``): a forked worker inherits the gRPC and Ray state of a process that already talked to
them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Never, cast

from torch.utils.data import IterableDataset, get_worker_info

from saintpipe.core.errors import SaintpipeTimeout, ServiceUnavailable
from saintpipe.loader.address import PipelineAddress, check_reachable
from saintpipe.loader.config import LoaderConfig, loader_options
from saintpipe.loader.minibatch import Minibatch
from saintpipe.minibatch.batch import build_minibatch
from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.config import TrainerConfig

if TYPE_CHECKING:
    from saintpipe.loader.embedded import EmbeddedPipeline
    from saintpipe.loader.session import Session
    from saintpipe.minibatch.feed import Item

log = logging.getLogger(__name__)


class SubgraphLoader(IterableDataset[Minibatch]):
    """Minibatches of a running (or embedded) pipeline's job; build it with :meth:`connect` or :meth:`embedded`.

    Args:
        address: where the pipeline is.
        config: the iteration's bounds and the consumer name.
        pipeline: the embedded pipeline this loader owns (stopped by :meth:`close`), or None.

    Raises:
        ServiceUnavailable: Redis or a feature shard did not answer within ``config.connect_timeout_s``
            (the message names the address).
        ConfigError, DatasetError: a bad setting or dataset directory.

    Example::

        with SubgraphLoader.embedded("data/demo", steps=100) as loader:
            for batch in DataLoader(loader, batch_size=None):
                loss = batch.loss(model(batch.x, batch.edge_index, batch.edge_weight))
    """

    def __init__(self, address: PipelineAddress, config: LoaderConfig | None = None,
                 pipeline: EmbeddedPipeline | None = None) -> None:
        from saintpipe.services.dataset.store import open_dataset

        from saintpipe.pipeline.timeline import Timeline

        super().__init__()
        self.address = address
        self.config = config or LoaderConfig()
        self._pipeline = pipeline
        # An embedded loader's start-up began with its pipeline's; a connected one's here.
        self.timeline = pipeline.timeline if pipeline is not None else Timeline(origin=time.time())
        self._closed = False
        check_reachable(address, self.config.connect_timeout_s)
        manifest = open_dataset(address.data).manifest
        self.num_nodes = manifest.num_nodes
        self.num_features = manifest.feature_dim
        self.num_classes = manifest.num_classes
        self.multilabel = manifest.multilabel

    # --- construction -------------------------------------------------------------------------------------
    @classmethod
    def connect(cls, redis_url: str | None = None, job: str | None = None,
                features: str | list[list[str]] | None = None, data: Path | str | None = None, *,
                config_file: Path | str | None = None, trainer: TrainerConfig | None = None,
                pool: PoolConfig | None = None, steps: int | None = None, epochs: float | None = None,
                name: str = "loader", connect_timeout_s: float = 10.0, group: str | None = None,
                **unknown: Never) -> SubgraphLoader:
        """A loader on a pipeline that runs elsewhere (``saintpipe serve ...``, compose, Kubernetes).

        Args:
            redis_url, job, features, data: what ``saintpipe serve trainer`` takes as ``--redis-url``,
                ``--job``, ``--features`` and ``--data``; the Redis URL defaults to ``[pool] url``, then
                ``SAINTPIPE_REDIS_URL``.
            config_file: a config file whose ``[pool]`` and ``[trainer]`` sections apply (under
                ``SAINTPIPE_POOL__*`` / ``SAINTPIPE_TRAINER__*``, as for ``saintpipe serve trainer``).
            trainer, pool: those sections as objects instead (then the file's are not read).
            steps, epochs, name, connect_timeout_s: the loader's options
                (:class:`~saintpipe.loader.config.LoaderConfig`, which checks them).
            group: read in this consumer group of the job's pool (registered here if it is not yet), so that
                several loaders (the trials of your own Tune or Optuna loop) each see every subgraph; it sees
                those put after it joined: register every group before the samplers start
                (:class:`~saintpipe.loader.embedded.EmbeddedPipeline`'s ``groups``) for the whole stream. None:
                the job's default group, shared with its trainers.
            unknown: no option has another name: one is refused with a ConfigError that names it (a type
                checker refuses it already).

        Raises:
            ConfigError: an address is missing or a setting is bad (naming it).
            ServiceUnavailable: Redis or a feature shard does not answer (naming its address).
        """
        from saintpipe.core.config import load_config
        from saintpipe.core.credentials import redis_url_with_password
        from saintpipe.core.errors import ConfigError

        path = Path(config_file) if config_file is not None else None
        if pool is None:
            pool = load_config(PoolConfig, path, flags={"url": redis_url, "job_id": job}, section="pool")
        elif job is not None:
            pool = pool.model_copy(update={"job_id": job})
        trainer = trainer or load_config(TrainerConfig, path, section="trainer")
        config = loader_options({"steps": steps, "epochs": epochs, "name": name,
                                 "connect_timeout_s": connect_timeout_s, **unknown})
        url = redis_url or pool.url or os.environ.get("SAINTPIPE_REDIS_URL")
        job = job or (pool.job_id if "job_id" in pool.model_fields_set else None)
        if not url or not features or not data or not job:
            missing = [arg for arg, value in (("redis_url", url), ("features", features), ("data", data),
                                              ("job", job)) if not value]
            raise ConfigError(f"SubgraphLoader.connect needs {', '.join(missing)} (the pipeline's "
                              "--redis-url, --features, --data and --job)")
        address = PipelineAddress(redis_url=redis_url_with_password(url), features=features, data=Path(data),
                                  pool=pool, trainer=trainer, group=group)
        if group is not None:
            from saintpipe.services.pool.pool import SubgraphPool

            with SubgraphPool.from_config(pool, url=address.redis_url) as joined:
                joined.add_group(group)
        return cls(address, config)

    @classmethod
    def embedded(cls, data: Path | str, *, config_file: Path | str | None = None,
                 overrides: dict[str, Any] | None = None, steps: int | None = None,
                 epochs: float | None = None, name: str = "loader", connect_timeout_s: float = 10.0,
                 **unknown: Never) -> SubgraphLoader:
        """Start the pipeline here (Redis, feature shards, a local Ray, the sampler service) and a loader on it.

        The loader owns the pipeline: :meth:`close` (or leaving its ``with`` block) stops everything.

        Args:
            data: the dataset directory.
            config_file: a ``saintpipe run`` config file (``[pool]``, ``[samplers]``, ``[trainer]`` feeding
                fields, ``[run]``).
            overrides: config sections as nested dicts over the file and the environment, e.g.
                ``{"samplers": {"sampler": {"roots": 500}}}``.
            steps, epochs, name, connect_timeout_s: the loader's options, as for :meth:`connect`.
            unknown: as for :meth:`connect`: refused with a ConfigError that names it.

        Raises:
            ConfigError: a bad setting, or Ray already initialized in this process.
            ServiceUnavailable: a component did not start (all that started is stopped again).
        """
        from saintpipe.loader.embedded import EmbeddedPipeline

        path = Path(config_file) if config_file is not None else None
        config = loader_options({"steps": steps, "epochs": epochs, "name": name,
                                 "connect_timeout_s": connect_timeout_s, **unknown})
        pipeline = EmbeddedPipeline.from_options(data, path, overrides).start()
        try:
            cfg = pipeline.config
            trainer = cfg.trainer.model_copy(update={"feature_token_file": pipeline.feature_token_file,
                                                     "sample_graph": cfg.samplers.graph})
            address = PipelineAddress(redis_url=pipeline.redis_url, features=pipeline.endpoints.shards,
                                      data=pipeline.data_dir.resolve(), pool=cfg.pool, trainer=trainer)
            return cls(address, config, pipeline=pipeline)
        except BaseException:
            pipeline.close()
            raise

    # --- iteration ------------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Minibatch]:
        if self._closed:
            raise RuntimeError("this SubgraphLoader was closed")
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        consumer = f"{self.address.job}-{self.config.name}" + (f"-w{worker}" if info is not None else "")
        steps, epochs = self.config.worker_share(worker, workers)
        return self._minibatches(consumer, steps, epochs, workers)

    def _minibatches(self, consumer: str, steps: int | None, epochs: float | None,
                     workers: int) -> Iterator[Minibatch]:
        from saintpipe.loader.session import Session

        with Session(self.address, consumer) as session:
            num_train = max(1, session.num_train)
            needed = None if epochs is None else epochs * num_train
            step, labelled = 0, 0.0
            while (steps is None or step < steps) and (needed is None or labelled < needed):
                item = self._next(session)
                batch = build_minibatch(item.subgraph, item.features, session.labels, session.train_mask,
                                        session.degrees, entry_id=item.entry_id, deliveries=item.deliveries,
                                        step=step, epoch=int(labelled * workers // num_train), kind=Minibatch)
                if step == 0:
                    self.timeline.mark("first minibatch")
                yield cast(Minibatch, batch)  # kind: the loader's, with graph_batch()
                # Back here: the caller asked for the next one, so its step with this one is done.
                item.ack()
                step += 1
                labelled += batch.num_labelled
            log.debug("%s: iteration ended after %d minibatches", consumer, step)

    def _next(self, session: Session) -> Item:
        """The next item; a dead component of the embedded pipeline is named instead of waited for."""
        self._raise_if_pipeline_failed()
        try:
            return session.next()
        except SaintpipeTimeout:
            self._raise_if_pipeline_failed()
            raise

    def _raise_if_pipeline_failed(self) -> None:
        failure = self._pipeline.failure if self._pipeline is not None else None
        if failure:
            raise ServiceUnavailable(f"embedded pipeline: {failure}; close the loader and start it again")

    def __len__(self) -> int:
        """``steps``, when the loader has a step bound (else TypeError, as for any unsized iterable)."""
        if self.config.steps is None:
            raise TypeError("this SubgraphLoader has no step bound (steps=None): its length is unknown")
        return self.config.steps

    # --- lifetime ---------------------------------------------------------------------------------------
    @property
    def startup(self) -> dict[str, float]:
        """When each part became ready, in seconds since :meth:`embedded` (or :meth:`connect`) was called: the
        embedded pipeline's parts (dataset, redis, feature shards, ray, sampler workers), then the first
        minibatch this process's iteration yielded (a ``DataLoader`` worker's first is its own)."""
        return dict(self.timeline.marks)

    @property
    def pipeline(self) -> EmbeddedPipeline | None:
        """The embedded pipeline this loader started (its ``endpoints``), or None."""
        return self._pipeline

    def close(self) -> None:
        """Stop the embedded pipeline, if this loader started one. Idempotent."""
        self._closed = True
        if self._pipeline is not None:
            self._pipeline.close()

    def __enter__(self) -> SubgraphLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # A DataLoader worker gets the addresses, never the pipeline: only the process that started it stops it.
        state = dict(self.__dict__)
        state["_pipeline"] = None
        return state

    def __repr__(self) -> str:
        return f"SubgraphLoader({self.address.describe()}, steps={self.config.steps}, epochs={self.config.epochs})"
