"""One trainer, assembled: the only place where a trainer's parts are wired together.

:func:`assemble_trainer` opens the dataset (topology, labels, splits), the
job's pool and the feature client with its cache (through the minibatch
path's :class:`~saintpipe.minibatch.inputs.PoolInputs`), builds the model and
the evaluation graph, joins the data-parallel group, resumes from the latest
checkpoint and builds the :class:`~saintpipe.trainer.loop.TrainLoop`. Every
way a trainer runs uses it: a run's trainer actors and ``serve trainer``'s
(:mod:`saintpipe.trainer.actor`), one rank in a process of its own
(:func:`run_trainer`); the accuracy experiment, which trains on an in-memory
graph, builds its loop with :func:`build_loop`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.config import TrainerConfig

if TYPE_CHECKING:
    import torch

    from saintpipe.minibatch.inputs import PoolInputs
    from saintpipe.services.feature_shard.cache import CacheConfig
    from saintpipe.trainer.distributed import DataParallel
    from saintpipe.trainer.evaluate import EvalGraph
    from saintpipe.trainer.loop import TrainLoop
    from saintpipe.trainer.result import TrainResult
    from saintpipe.trainer.metrics import TrainerMetrics
    from saintpipe.trainer.step import TrainState

log = logging.getLogger(__name__)


@dataclass
class TrainerSpec:
    """Everything a trainer needs to know about its job (picklable: sent to each Ray actor).

    Attributes:
        job: the training job (pool stream name).
        dataset_dir: the dataset directory (topology, labels, splits).
        pool_url: Redis URL of the subgraph pool.
        feature_addresses: shard addresses, ``"h:p,h:p;h:p"`` (``;`` between shards, ``,`` between replicas),
            a list of replica lists, or a JSON address manifest path.
        config: the trainer configuration.
        pool: the job's pool settings (visibility timeout, reconnects).
        metrics_port: the trainers' Prometheus port (0: a free port; None: no endpoint). Ray actors sharing
            hosts serve rank r on ``metrics_port + r`` (:class:`~saintpipe.trainer.actor.TrainerActor`).
        metrics_host: bind address of the metrics endpoints.
        output_dir: the run directory: rank 0 writes metrics.jsonl, best.pt and final.pt there
            (:mod:`saintpipe.trainer.run_dir.outputs`); None: none are kept.
        group: the pool's consumer group the trainer reads in (a sweep's trial); None: the job's default one.
        trial: the ``trial`` label of the trainer's metrics: a sweep's trial id (its trials share the job, so
            their trainers share a name); empty for a plain run, whose series then carry no such label.
    """

    job: str
    dataset_dir: str
    pool_url: str
    feature_addresses: Sequence[Sequence[str]] | str
    config: TrainerConfig = field(default_factory=TrainerConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    output_dir: str | None = None
    group: str | None = None
    trial: str = ""


def pick_device(name: str) -> torch.device:
    """``auto``: the first CUDA device when torch sees one, else the CPU.

    Raises:
        ConfigError: not a torch device name, or a CUDA device this torch cannot reach.
    """
    import torch

    from saintpipe.core.errors import ConfigError

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(f"device {name!r} is not a torch device (cpu, cuda, cuda:1, ... or auto)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device {name!r}: this torch ({torch.__version__}) sees no CUDA GPU; use cpu or auto")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device {name!r}: torch sees {torch.cuda.device_count()} CUDA device(s)")
    return device


def trainer_name(job: str, rank: int) -> str:
    return f"{job}-trainer-{rank}"


def new_state(config: TrainerConfig, graph: EvalGraph, device: torch.device | str = "cpu") -> TrainState:
    """The model and optimizer of ``config`` for ``graph``'s features and classes, seeded by ``config.seed``."""
    from saintpipe.trainer.step import TrainState

    return TrainState(config.model, graph.feature_dim, graph.num_classes, graph.multilabel, device=device,
                      seed=config.seed)


def build_loop(state: TrainState, graph: EvalGraph, config: TrainerConfig, **parts: Any) -> TrainLoop:
    """The training loop over ``state`` and ``graph``: the one place a :class:`TrainLoop` is made.

    ``parts`` are :class:`TrainLoop`'s keyword arguments (name, metrics, sync, decide, is_leader, checkpointer,
    feature_meter, sampled_degrees, outputs, on_validation, on_first_step); what is not given is left out (an
    in-memory experiment needs none of the services' parts).
    """
    from saintpipe.trainer.loop import TrainLoop

    return TrainLoop(state, graph, config, **parts)


class AssembledTrainer:
    """One trainer, wired: its loop, the inputs feeding it, its data-parallel group and metrics endpoint.

    :meth:`run` trains to the end and closes everything; :meth:`close` alone releases what was opened
    (a trainer that is stopped before it trains).
    """

    def __init__(self, loop: TrainLoop, inputs: PoolInputs, group: DataParallel | None,
                 http: Any | None, metrics: TrainerMetrics, metrics_url: str | None) -> None:
        self.loop, self.inputs, self.group, self.http = loop, inputs, group, http
        self.metrics, self.metrics_url = metrics, metrics_url

    def run(self) -> TrainResult:
        """Train until the epochs, max_steps or early stopping end it; then close the connections."""
        try:
            if self.inputs.feed is None:  # assemble_trainer started it (what feeding from None raised before)
                raise AttributeError("the trainer's pool feed was not started")
            result = self.loop.run(self.inputs.feed)
            log.info("%s: done: %s", self.loop.name, result.summary())
            return result
        finally:
            self.close()

    def close(self) -> None:
        """Stop the feed, leave the group, close the connections and the metrics endpoint. Idempotent."""
        inputs, group, http = self.inputs, self.group, self.http
        self.group = self.http = None
        _close(inputs, group, http)


def assemble_trainer(
    spec: TrainerSpec,
    rank: int = 0,
    world_size: int = 1,
    master: str | None = None,
    *,
    threads: int = 0,
    metrics_port: int | None = None,
    cache: CacheConfig | None = None,
    on_validation: Callable[[float, float, int], None] | None = None,
    on_first_step: Callable[[], None] | None = None,
) -> AssembledTrainer:
    """Open the dataset, the pool, the feature client (and its cache), join the group, build the loop.

    Args:
        spec: the job.
        rank, world_size: this trainer's place in the data-parallel group.
        master: ``host:port`` of the group's rendezvous (needed when ``world_size > 1``).
        threads: torch intra-op threads when ``[trainer] threads`` is 0 (0: torch's default; a run's trainer
            actor, which Ray gives one CPU, passes 1).
        metrics_port: serve /metrics there (0: a free port; None: no endpoint).
        cache: the feature client's trainer-side cache (static highest-degree rows plus LRU), or None.
        on_validation: called by rank 0 after each validation with (epoch, validation score, step): a sweep's
            trial reports it to Ray Tune.
        on_first_step: called once, in the loop's thread, right after the first step (a run's trainer with a
            deadline estimates a full-graph evaluation there).

    Raises:
        ServiceUnavailable: Redis or a feature shard cannot be reached.
        DatasetError: the dataset directory or a checkpoint is unreadable.
        ConfigError: a device this torch cannot use.
    """
    import torch

    from saintpipe.minibatch.inputs import PoolInputs
    from saintpipe.services.dataset.sample_graph import sampled_degrees
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.trainer.run_dir.checkpoint import Checkpointer
    from saintpipe.trainer.distributed import DataParallel
    from saintpipe.trainer.evaluate import EvalGraph
    from saintpipe.trainer.metrics import FeatureMeter, TrainerMetrics, serve_metrics
    from saintpipe.trainer.run_dir.model_file import DatasetInfo
    from saintpipe.trainer.run_dir.outputs import RunOutputs

    cfg = spec.config
    name = trainer_name(spec.job, rank)
    if cfg.threads or threads:
        torch.set_num_threads(cfg.threads or threads)
    device = pick_device(cfg.device)
    metrics = TrainerMetrics(name, spec.trial)
    http = url = None
    if metrics_port is not None:
        http = serve_metrics(metrics_port, spec.metrics_host)
        url = f"http://{spec.metrics_host}:{http.server_address[1]}/metrics"
        log.info("%s: metrics on %s", name, url)
    inputs = group = None
    try:
        dataset = open_dataset(Path(spec.dataset_dir))
        inputs = PoolInputs(dataset, consumer=name, features=spec.feature_addresses,
                            pool=spec.pool.model_copy(update={"job_id": spec.job}), redis_url=spec.pool_url,
                            cache=cache, group=spec.group, **cfg.feed_options())
        # The training steps' gathers are counted apart from evaluation's (hit rate, bytes per step).
        if inputs.client is None:  # PoolInputs made it (or raised)
            raise AttributeError("the trainer's inputs have no feature client")
        meter = FeatureMeter(inputs.client, metrics)
        graph = EvalGraph(indptr=dataset.indptr, indices=dataset.indices, labels=dataset.labels,
                          gather=meter.gather_uncounted, feature_dim=dataset.manifest.feature_dim,
                          splits=dict(dataset.splits))
        state = new_state(cfg, graph, device)
        if world_size > 1:
            if master is None:
                raise ValueError("a data-parallel trainer needs the rendezvous address (master)")
            group = DataParallel(rank, world_size, master, device, timeout_s=max(300.0, 4 * cfg.pool_timeout_s))
        loop = build_loop(state, graph, cfg, name=name, metrics=metrics,
                          sync=group.sync if group else None, decide=group.decide if group else None,
                          is_leader=rank == 0,
                          checkpointer=Checkpointer(cfg.checkpoint_dir) if cfg.checkpoint_dir else None,
                          feature_meter=meter, sampled_degrees=sampled_degrees(dataset, cfg.sample_graph),
                          outputs=RunOutputs(spec.output_dir, DatasetInfo.from_dataset(dataset))
                          if spec.output_dir is not None else None, on_validation=on_validation,
                          on_first_step=on_first_step)
        if group is not None:
            group.check_same_start(state.steps)
        inputs.start_feed(meter.gather)
    except BaseException:
        _close(inputs, group, http)
        raise
    return AssembledTrainer(loop, inputs, group, http, metrics, url)


def _close(inputs: PoolInputs | None, group: DataParallel | None, http: Any | None) -> None:
    """Close what an assembly opened (the inputs first, the metrics endpoint last), each part even when
    another's close fails."""
    with contextlib.ExitStack() as closing:  # last in, first closed
        if http is not None:
            closing.callback(http.server_close)
            closing.callback(http.shutdown)
        if group is not None:
            closing.callback(group.close)
        if inputs is not None:
            closing.callback(inputs.close)


def run_trainer(
    spec: TrainerSpec, rank: int = 0, world_size: int = 1, master: str | None = None
) -> TrainResult:
    """Run one trainer of ``spec``'s job in this process until its epochs, max_steps or early stopping end it
    (``serve trainer --world-size/--rank``: one rank per process, without Ray). Its metrics are served on
    ``spec.metrics_port`` itself: each such process has a host (a pod) of its own.

    Raises:
        ServiceUnavailable: Redis or a feature shard cannot be reached.
        SaintpipeTimeout: no subgraph arrived within ``config.pool_timeout_s``.
        DatasetError: the dataset directory or a checkpoint is unreadable.
    """
    return assemble_trainer(spec, rank, world_size, master, metrics_port=spec.metrics_port).run()
