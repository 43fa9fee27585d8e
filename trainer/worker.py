"""One trainer of a job, wired to the real services: the dataset, the Redis pool and the feature shards.

:func:`run_trainer` is what each trainer actor runs (and what a single trainer
can run in-process): it opens the dataset (topology, labels, splits), connects
to the pool and the feature service, joins the data-parallel group, resumes
from the latest checkpoint, and runs :class:`~saintpipe.trainer.loop.TrainLoop` on a
:class:`~saintpipe.trainer.feeds.PoolFeed`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.checkpoint import Checkpointer
from saintpipe.trainer.config import TrainerConfig
from saintpipe.trainer.loop import TrainResult

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
        metrics_port: this trainer's Prometheus port (0: a free port; None: no endpoint). A group of
            trainers sharing one host gives each rank its own (:class:`~saintpipe.trainer.actor.TrainerGroup`
            offsets it by the rank).
        metrics_host: bind address of the metrics endpoints.
        output_dir: the run directory: rank 0 writes metrics.jsonl, best.pt and final.pt there
            (:mod:`saintpipe.trainer.run_files`); None: none are kept.
    """

    job: str
    dataset_dir: str
    pool_url: str
    feature_addresses: object
    config: TrainerConfig = field(default_factory=TrainerConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    output_dir: str | None = None


def pick_device(name: str) -> torch.device:
    """``auto``: the first CUDA device when torch sees one, else the CPU.

    Raises:
        ConfigError: not a torch device name, or a CUDA device this torch cannot reach.
    """
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


def take_back(pool, name: str) -> int:
    """What trainer ``name`` held unacknowledged before it was restarted, delivered to it again at once.

    A restarted trainer (a Ray actor, a container, a pod) comes back under its old name; without this its
    subgraphs would wait out the pool's visibility timeout. Returns how many there were.
    """
    recovered = pool.recover(name)
    if recovered:
        log.info("%s: %d unacknowledged subgraph(s) of its previous life delivered again", name, recovered)
    return recovered


def run_trainer(
    spec: TrainerSpec, rank: int = 0, world_size: int = 1, master: str | None = None
) -> TrainResult:
    """Run one trainer of ``spec``'s job until its epochs, max_steps or early stopping end it.

    Args:
        spec: the job.
        rank, world_size: this trainer's place in the data-parallel group.
        master: ``host:port`` of the group's rendezvous (needed when ``world_size > 1``).

    Raises:
        ServiceUnavailable: Redis or a feature shard cannot be reached.
        SaintpipeTimeout: no subgraph arrived within ``config.pool_timeout_s``.
        DatasetError: the dataset directory or a checkpoint is unreadable.
    """
    from saintpipe.services.dataset.expand import SubgraphExpander
    from saintpipe.services.dataset.sample_graph import sampled_degrees
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.services.feature_shard.client import FeatureClient
    from saintpipe.services.pool.pool import SubgraphPool
    from saintpipe.trainer.distributed import DataParallel
    from saintpipe.trainer.evaluate import EvalGraph
    from saintpipe.trainer.feeds import PoolFeed
    from saintpipe.trainer.loop import TrainLoop
    from saintpipe.trainer.metrics import FeatureMeter, TrainerMetrics, serve_metrics
    from saintpipe.trainer.run_files import outputs_for
    from saintpipe.trainer.step import TrainState

    cfg = spec.config
    name = trainer_name(spec.job, rank)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = pick_device(cfg.device)
    metrics = TrainerMetrics(name)
    http = None
    if spec.metrics_port is not None:
        http = serve_metrics(spec.metrics_port, spec.metrics_host)
        log.info("%s: metrics on http://%s:%d/metrics", name, spec.metrics_host, http.server_address[1])
    dataset = open_dataset(Path(spec.dataset_dir))
    client = FeatureClient(spec.feature_addresses, name=name, shared_memory=cfg.feature_shared_memory,
                           retry_deadline_s=cfg.feature_retry_deadline_s, security=cfg.feature_security())
    pool = SubgraphPool.from_config(spec.pool.model_copy(update={"job_id": spec.job}), url=spec.pool_url)
    group = None
    feed = None
    meter = FeatureMeter(client, metrics)  # the training steps' gathers, apart from evaluation's
    try:
        graph = EvalGraph(
            indptr=dataset.indptr,
            indices=dataset.indices,
            labels=dataset.labels,
            gather=meter.gather_uncounted,
            feature_dim=dataset.manifest.feature_dim,
            splits=dict(dataset.splits),
        )
        state = TrainState(
            cfg.model, graph.feature_dim, graph.num_classes, graph.multilabel, device=device, seed=cfg.seed
        )
        if world_size > 1:
            if master is None:
                raise ValueError("a data-parallel trainer needs the rendezvous address (master)")
            group = DataParallel(
                rank, world_size, master, device, timeout_s=max(300.0, 4 * cfg.pool_timeout_s)
            )
        checkpointer = Checkpointer(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        loop = TrainLoop(
            state,
            graph,
            cfg,
            name=name,
            metrics=metrics,
            sync=group.sync if group else None,
            decide=group.decide if group else None,
            is_leader=rank == 0,
            checkpointer=checkpointer,
            feature_meter=meter,
            sampled_degrees=sampled_degrees(dataset, cfg.sample_graph),
            outputs=outputs_for(spec.output_dir, dataset),
        )
        if group is not None:
            group.check_same_start(state.steps)
        take_back(pool, name)
        feed = PoolFeed(pool, name, meter.gather, prefetch=cfg.prefetch, expand=SubgraphExpander(dataset))
        result = loop.run(feed)
        log.info("%s: done: %s", name, result.summary())
        return result
    finally:
        if feed is not None:
            feed.close()
        if group is not None:
            group.close()
        pool.close()
        client.close()
        if http is not None:
            http.shutdown()
            http.server_close()
