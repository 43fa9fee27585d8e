"""The pipeline a loader starts itself: what ``saintpipe run`` starts, minus its trainers.

:class:`EmbeddedPipeline` is :class:`~saintpipe.pipeline.runner.LocalPipeline`
with the trainer steps left out: the same start-up code starts a private Redis
(or uses ``[pool] url``), one feature-shard process per shard and a local Ray at
once, then the sampler service, each registered with the runner's
supervisor as it starts; :meth:`EmbeddedPipeline.close` stops them in reverse
order and leaves nothing behind: no process, no port, no shared-memory slot of
the job; ``startup`` says when each part became ready. The training loop is the caller's, through
:class:`~saintpipe.loader.stream.SubgraphLoader`.

Two things differ from ``saintpipe run``, because a library runs inside
someone else's program: it installs no SIGINT/SIGTERM handler of its own
(``ray.init`` still sets Ray's; Ctrl-C raises KeyboardInterrupt in the caller,
whose ``with`` block or ``close()`` stops everything), and a component that dies is not restarted: the loader reports it
(``failure``) instead of waiting for subgraphs that will not come.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saintpipe.core.errors import ConfigError, ServiceUnavailable
from saintpipe.pipeline.config import PipelineConfig
from saintpipe.pipeline.runner import LocalPipeline, Stopped
from saintpipe.pipeline.supervision import Supervisor
from saintpipe.pipeline.timeline import Timeline

if TYPE_CHECKING:
    from saintpipe.services.dataset.store import Dataset

log = logging.getLogger(__name__)


class _LibrarySupervisor(Supervisor):
    """The runner's supervisor, leaving the host program's signal handlers alone."""

    def install_signal_handlers(self) -> None:
        return None


class EmbeddedPipeline(LocalPipeline):
    """Redis, the feature shards, a local Ray and the sampler service of one dataset, started in this process.

    Args:
        config: the pipeline's configuration (``config.run.data`` must be set); its ``[trainer]`` feeding
            fields (``pool_timeout_s``, ``prefetch``, ...) are the loader's, its model fields unused.
        groups: consumer groups registered in the job's pool before the samplers start, each then seeing the
            whole stream (loaders read one with ``SubgraphLoader.connect(..., group=NAME)``; a sweep's trials).

    Example::

        with EmbeddedPipeline.from_options("data/demo") as pipeline:
            print(pipeline.endpoints.redis, pipeline.endpoints.shards)

    Raises (on :meth:`start`):
        ConfigError: Ray is already initialized in this process (the pipeline starts its own local Ray).
        ServiceUnavailable: a component did not come up (everything started so far is stopped again).
        DatasetError: the dataset directory is unreadable.
    """

    def __init__(self, config: PipelineConfig, groups: Sequence[str] = ()) -> None:
        super().__init__(config, out=io.StringIO())
        self.groups = list(groups)
        self.supervisor = _LibrarySupervisor(interval=config.run.watch_interval_s, budget=self.supervisor.budget)
        self.dataset: Dataset | None = None
        self.redis_url = ""
        self._started = False

    def _start_samplers(self, dataset: Any) -> None:
        if self.groups:  # before the first put: each group sees every entry
            from saintpipe.services.pool.pool import SubgraphPool

            with SubgraphPool.from_config(self.config.pool, url=self.redis_url) as pool:
                for group in self.groups:
                    pool.add_group(group)
        super()._start_samplers(dataset)

    @classmethod
    def from_options(cls, data: Path | str, config_file: Path | str | None = None,
                     overrides: dict[str, Any] | None = None) -> EmbeddedPipeline:
        """Configure from a ``saintpipe run`` config file, the environment and ``overrides`` (highest).

        Args:
            data: the dataset directory.
            config_file: a TOML, YAML or JSON file with ``[pool]``, ``[samplers]``, ``[trainer]``, ``[run]``.
            overrides: sections as nested dicts, e.g. ``{"samplers": {"sampler": {"roots": 500}}}``; a None
                sets nothing, :data:`saintpipe.core.config.NULL` sets a field to None (``clip_multiple``).

        Raises:
            ConfigError: naming the file, variable or field at fault.
        """
        from saintpipe.core.config import deep_merge, load_config

        flags = deep_merge({"run": {"data": Path(data)}}, overrides or {})
        return cls(load_config(PipelineConfig, Path(config_file) if config_file is not None else None, flags))

    def start(self) -> EmbeddedPipeline:
        """Start every component, each waited for; on any failure stop what started and raise."""
        import ray

        from saintpipe.services.dataset.store import open_dataset

        if self._started:
            return self
        if ray.is_initialized():
            raise ConfigError("the embedded pipeline starts its own local Ray, but Ray is already initialized in "
                              "this process: call ray.shutdown() first, or run the pipeline apart (saintpipe serve "
                              "...) and use SubgraphLoader.connect")
        self.timeline = Timeline(origin=time.time())  # the start-up counts from here, not the process's start
        self.dataset = open_dataset(self.data_dir)
        self.timeline.mark("dataset")
        self._started = True
        try:
            self._start_services(self.dataset)  # Redis, the shards and Ray at once, as a run starts them
            self._start_samplers(self.dataset)
            self._checkpoint()
        except Stopped:  # a component died while the others started
            self.close()
            raise ServiceUnavailable(f"embedded pipeline: {self.supervisor.failure or 'stopped while starting'}; "
                                     "everything it started was stopped") from None
        except BaseException:
            self.close()
            raise
        self.supervisor.start_watching()
        log.info("embedded pipeline up in %.1f s: redis %s, shards %s", time.time() - self.timeline.origin,
                 self.endpoints.redis, self.endpoints.shards)
        return self

    @property
    def startup(self) -> dict[str, float]:
        """When each part became ready (dataset, redis, feature shards, ray, sampler workers), in seconds since
        :meth:`start` was called."""
        return dict(self.timeline.marks)

    @property
    def feature_token_file(self) -> Path | None:
        """The file holding the shards' token (clients read it; deleted when the shards stop)."""
        return self.shards.token_file

    @property
    def failure(self) -> str | None:
        """Why a component stopped, once one did (None while all run)."""
        return self.supervisor.failure

    def close(self) -> None:
        """Stop every component started, last started first. Idempotent."""
        self.supervisor.close()

    def __enter__(self) -> EmbeddedPipeline:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
