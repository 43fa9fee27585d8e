"""Where a sweep's shared services come from: started by the sweep itself, or already running.

:class:`EmbeddedServices` is the loader's embedded pipeline (a private Redis, the feature shards, a local
Ray, the sampler service), which registers the first trials' pool groups before its samplers put anything.

:class:`RunningServices` is a pipeline that runs already (the compose stack, the Helm release): the pool's
Redis (``[pool] url``, else ``SAINTPIPE_REDIS_URL``), the feature shards (``[sweep] features``, what
``saintpipe serve trainer --features`` takes, with the ``[trainer] feature_tls_*``/``feature_token_file``
security), the samplers of job ``[pool] job_id`` and their dataset directory (``[run] data``). Only Ray is
the sweep's own, local, one CPU per concurrent trial. Its samplers have been filling the job's stream for
its other groups, so before the trials read (:func:`claim_stream`):

* a group whose consumers all got no entry for ``[pool] visibility_timeout`` seconds (the pool's own
  rule for a consumer that is gone: its entries go to another) or that has none, is nobody's: once the
  trials' groups are registered it is removed, which releases what it held (one log line each). The
  job's default group, which a finished stack trainer leaves full, is the usual one;
* a consumer seen more recently is watched, up to that timeout: a trainer that has just finished goes
  quiet; one that gets an entry again meanwhile (Redis 7.2 and later: asks for one) is alive;
* the default group with a live consumer (the stack's trainer still training) is a refusal: a sweep never
  takes a live trainer's group (scale the trainer to 0 first). A live registered group (your own loader's)
  is left alone: it keeps reading beside the trials.

When the sweep ends (:meth:`RunningServices.leave`) the job is handed back to its default group: it is
registered anew at the stream's end and every trial group still there is removed, so the next trainer
(``docker compose up -d trainer``) or sweep finds a pool it can use.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from saintpipe.core.errors import ConfigError
from saintpipe.pipeline.config import PipelineConfig
from saintpipe.services.pool.keys import GROUP
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.records import GroupConsumer
from saintpipe.sweep.config import SweepConfig

log = logging.getLogger(__name__)

# A consumer seen reading this much later than an earlier look said has read again: it is alive.
_SEEN_AGAIN_S = 0.5


class EmbeddedServices:
    """The services the sweep starts itself: :class:`~saintpipe.loader.embedded.EmbeddedPipeline`."""

    def __init__(self, config: PipelineConfig, groups: Sequence[str]) -> None:
        from saintpipe.loader.embedded import EmbeddedPipeline

        self.pipeline = EmbeddedPipeline(config, groups)
        self.redis_url = ""
        self.feature_addresses: str | list[list[str]] = ""
        self.data_dir = Path(self.pipeline.data_dir)
        self.feature_token_file: Path | None = None
        self.metrics: dict[str, str] = {}

    def __enter__(self) -> EmbeddedServices:
        self.pipeline.start()
        self.redis_url = self.pipeline.redis_url
        self.feature_addresses = self.pipeline.shards.addresses
        self.feature_token_file = self.pipeline.feature_token_file
        self.metrics = dict(self.pipeline.endpoints.metrics)
        return self

    def __exit__(self, *exc: object) -> None:
        self.pipeline.close()

    def leave(self, pool: SubgraphPool, trials: set[str], ended: set[str]) -> list[str]:
        """The groups of trials that had not ended; the job's last group goes with the private Redis."""
        return [g for g in pool.groups() if g not in ended]

    def sampler_cpu_seconds(self) -> tuple[float, float]:
        """The samplers' CPU seconds so far (:meth:`LocalPipeline.sampler_cpu_seconds`)."""
        return self.pipeline.sampler_cpu_seconds()


class RunningServices:
    """A pipeline that runs already; the sweep starts only a local Ray for its trials.

    Args:
        config: the sweep's configuration (``[sweep] features`` set).
        trials: the trials to run, in order: the groups of the first ``concurrent`` are registered on start
            (:func:`claim_stream`), any of them still there is removed on the way out.
        concurrent: trials at a time: the local Ray's CPUs.
    """

    def __init__(self, config: SweepConfig, trials: Sequence[str], concurrent: int) -> None:
        from saintpipe.core.credentials import redis_url_with_password

        url = running_redis_url(config)
        assert url is not None and config.sweep.features is not None and config.run.data is not None  # checked
        self.config = config
        self.trials = list(trials)
        self.groups = self.trials[:concurrent]
        self.cpus = concurrent
        self.redis_url = redis_url_with_password(url)
        self.feature_addresses: str | list[list[str]] = config.sweep.features
        self.data_dir = Path(config.run.data)
        self.feature_token_file = config.trainer.feature_token_file
        self.metrics: dict[str, str] = {}  # the running services are their own deployment's to scrape
        self._ray = False
        self._claimed = False  # the trials' groups are in the job: it is handed back on the way out

    def __enter__(self) -> RunningServices:
        from saintpipe.core.ray_cluster import connect_ray
        from saintpipe.loader.address import PipelineAddress, check_reachable

        address = PipelineAddress(self.redis_url, self.feature_addresses, self.data_dir, self.config.pool,
                                  self.config.trainer)
        check_reachable(address, timeout_s=10.0)  # names the address that does not answer
        with SubgraphPool.from_config(self.config.pool, url=self.redis_url) as pool:
            claim_stream(pool, self.groups, self.config.pool.visibility_timeout)
        self._claimed = True
        verbose = logging.getLogger().isEnabledFor(logging.INFO)
        try:
            self._ray = connect_ray("local", num_cpus=self.cpus, log_to_driver=verbose,
                                    logging_level=logging.INFO if verbose else logging.WARNING,
                                    configure_logging=verbose)
        except BaseException:
            self.__exit__()
            raise
        log.info("sweep on running services: %s; a local Ray of %d CPU(s) for the trials", address.describe(),
                 self.cpus)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ray:
            import ray

            ray.shutdown()
            self._ray = False
        if self._claimed:  # the sweep failed before it left the job: hand it back all the same
            with SubgraphPool.from_config(self.config.pool, url=self.redis_url) as pool:
                self.leave(pool, set(self.trials), set())

    def leave(self, pool: SubgraphPool, trials: set[str], ended: set[str]) -> list[str]:
        """Hand the job back to its default group (:func:`hand_back`); returns the trial groups left (none)."""
        hand_back(pool, [g for g in pool.groups() if g in trials])
        self._claimed = False
        return [g for g in pool.groups() if g in trials]

    def sampler_cpu_seconds(self) -> tuple[float, float]:
        """NaN: the samplers are the running pipeline's, on hosts of its own."""
        return math.nan, math.nan


def running_redis_url(config: SweepConfig, environ: dict[str, str] | None = None) -> str | None:
    """The running pool's Redis URL: ``[pool] url``, else ``SAINTPIPE_REDIS_URL`` (as ``serve trainer``)."""
    env = os.environ if environ is None else environ
    return config.pool.url or env.get("SAINTPIPE_REDIS_URL") or None


def check_running(config: SweepConfig, environ: dict[str, str] | None = None) -> None:
    """With ``[sweep] features`` set, what a sweep on running services needs besides, checked before anything
    starts.

    Raises:
        ConfigError: one line naming what is missing.
    """
    if config.sweep.features is None:
        return
    missing = [what for what, value in (
        ("--redis-url (or SAINTPIPE_REDIS_URL): the running pool's Redis", running_redis_url(config, environ)),
        ("--data: the dataset directory the running samplers read", config.run.data)) if not value]
    if missing:
        raise ConfigError(f"--features {config.sweep.features}: a sweep on running services also needs "
                          + "; ".join(missing))


def claim_stream(pool: SubgraphPool, ours: Sequence[str], quiet_after_s: float,
                 sleep: Callable[[float], None] = time.sleep) -> dict[str, int]:
    """Register the groups ``ours`` in the job of a running pipeline, and remove the groups nobody reads.

    A group is nobody's when each of its consumers (if it has any) last got an entry at least
    ``quiet_after_s`` seconds ago; consumers seen more recently are watched until then (see the module).

    Returns:
        The groups removed, each with the number of entries its removal released.

    Raises:
        ConfigError: the job's default group has a live consumer (nothing was changed).
    """
    others = _other_groups(pool, ours)
    recent = [c for consumers in others.values() for c in consumers if c.idle_s < quiet_after_s]
    if recent:
        others = _watch(pool, ours, recent, quiet_after_s, sleep)
    live = {g: [c for c in cs if c.idle_s < quiet_after_s] for g, cs in others.items()}
    if live.get(GROUP):
        c = min(live[GROUP], key=lambda c: c.idle_s)
        raise ConfigError(f"pool job {pool.job_id}: its default group {GROUP!r} is being read (consumer {c.name} "
                          f"read it {c.idle_s:.1f} s ago): a sweep does not take a live trainer's "
                          "group; stop that trainer first (docker compose: --scale trainer=0; Helm: the "
                          "sweep Job replaces the trainer Job) or let it finish")
    unread = [g for g, cs in live.items() if not cs]
    if GROUP in unread:
        pool.add_group(GROUP)  # registered, its entries are released for it by remove_group (none is lost)
    for group in ours:
        pool.add_group(group)
    released: dict[str, int] = {}
    for group in unread:
        s = pool.stats(group=group)
        seen = min((c.idle_s for c in others[group]), default=None)  # its latest reader
        released[group] = pool.remove_group(group)
        log.info("sweep: pool job %s: group %r had no active consumer (%s): removed once the trials' groups "
                 "were registered, releasing %d subgraph(s) (its account: produced %d, acknowledged %d, "
                 "waiting %d, pending %d, dead-lettered %d)", pool.job_id, group,
                 "none" if seen is None else f"last read {seen:.0f} s ago",
                 released[group], s.produced, s.acknowledged, s.depth, s.pending, s.dead_lettered)
    return released


def _other_groups(pool: SubgraphPool, ours: Sequence[str]) -> dict[str, list[GroupConsumer]]:
    """The job's default group (when the stream has it) and its registered groups, but ``ours``, with their
    consumers."""
    registered = set(pool.groups())
    on_stream = pool.consumers()
    names = (registered | ({GROUP} & set(on_stream))) - set(ours)
    return {g: on_stream.get(g, []) for g in sorted(names)}


def _watch(pool: SubgraphPool, ours: Sequence[str], recent: list[GroupConsumer], quiet_after_s: float,
           sleep: Callable[[float], None]) -> dict[str, list[GroupConsumer]]:
    """Read the consumers again each second until the recent ones are quiet, or one of them asks again."""
    start = time.monotonic()
    seen = {(c.group, c.name): start - c.idle_s for c in recent}
    wait = quiet_after_s - min(c.idle_s for c in recent)
    names = ", ".join(sorted({f"{c.group}/{c.name}" for c in recent}))
    log.info("sweep: pool job %s: consumer(s) %s read less than %.0f s ago: watching them for up "
             "to %.0f s (a trainer that has finished goes quiet)", pool.job_id, names, quiet_after_s, wait)
    while True:
        sleep(min(1.0, max(0.0, start + wait - time.monotonic()) + 0.05))
        now = time.monotonic()
        others = _other_groups(pool, ours)
        consumers = [c for cs in others.values() for c in cs]
        if any(now - c.idle_s > seen.get((c.group, c.name), now) + _SEEN_AGAIN_S for c in consumers):
            return others  # one read again: it is live (the caller says so, or leaves a live group alone)
        if all(c.idle_s >= quiet_after_s for c in consumers if (c.group, c.name) in seen):
            return others


def hand_back(pool: SubgraphPool, trial_groups: Sequence[str]) -> int:
    """Register the job's default group again (at the stream's end) and remove ``trial_groups``: what the
    trials held is released, and a trainer or a sweep started next reads the job as before the sweep.

    Returns:
        The entries released.
    """
    pool.add_group(GROUP)
    released = sum(pool.remove_group(g) for g in trial_groups if g in pool.groups())
    log.info("sweep: pool job %s handed back to its default group %r (the trials' groups %s removed, %d "
             "subgraph(s) released): the next trainer or sweep reads from here", pool.job_id, GROUP,
             ", ".join(trial_groups) or "-", released)
    return released


class SweepServices(Protocol):
    """What the driver uses of either kind of services."""

    redis_url: str
    feature_addresses: str | list[list[str]]
    data_dir: Path
    feature_token_file: Path | None
    metrics: dict[str, str]  # the services' metrics endpoints the sweep lists for Prometheus, by name

    def __enter__(self) -> SweepServices: ...

    def __exit__(self, *exc: object) -> None: ...

    def leave(self, pool: SubgraphPool, trials: set[str], ended: set[str]) -> list[str]:
        """Leave the job's pool as the kind of services documents, once the trials are over; returns the
        groups of trials left in it."""

    def sampler_cpu_seconds(self) -> tuple[float, float]:
        """The samplers' CPU seconds so far, ``(process, producing)``; NaN where the sweep cannot read them."""


def open_services(config: SweepConfig, trials: Sequence[str], concurrent: int) -> SweepServices:
    """The sweep's services: the running ones when ``[sweep] features`` names feature shards, else its own; the
    groups of the first ``concurrent`` of ``trials`` (the trials to run, in order) are registered as they start."""
    if config.sweep.features is not None:
        return RunningServices(config, trials, concurrent)
    return EmbeddedServices(config.services_config(), trials[:concurrent])
