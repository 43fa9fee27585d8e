"""``saintpipe run``: the whole pipeline on one machine, started and stopped as one unit.

Start order (each step waits until its component answers): a private Redis (or ``SAINTPIPE_REDIS_URL`` /
``[pool] url``), one feature-shard process per shard on free loopback ports, a local Ray cluster, the sampler
service, the trainer(s). Then the runner shows one progress bar per epoch until training ends, and prints the
summary. Every component is registered with a :class:`~saintpipe.pipeline.supervision.Supervisor` as soon as
it starts: during start-up a failure stops everything started so far; once training runs, a component that
dies is restarted within ``[run] max_restarts`` per ``[run] restart_window_s`` (docs/explanation/reliability.md).
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from saintpipe.core.errors import ServiceUnavailable
from saintpipe.core.report import plural
from saintpipe.pipeline.budget import RunBudget
from saintpipe.pipeline.config import PipelineConfig
from saintpipe.pipeline.progress import EpochBars
from saintpipe.pipeline.restarts import RestartBudget
from saintpipe.pipeline.summary import PoolAccount, RunSummary
from saintpipe.pipeline.supervision import Failure, Supervisor
from saintpipe.pipeline.timeline import Timeline
from saintpipe.pipeline.kernel_cache import kernels_cached
from saintpipe.trainer.timing import TimeBreakdown

if TYPE_CHECKING:
    from saintpipe.services.pool.redis_server import RedisServer
    from saintpipe.services.sampler_service.service import SamplerService
    from saintpipe.trainer.actor import TrainerGroup

log = logging.getLogger(__name__)


class Stopped(Exception):
    """A stop was requested (signal or failure) while the pipeline was starting."""


class RunFailed(ServiceUnavailable):
    """A component failed for good; ``summary`` says what ran and where the checkpoint to resume from is."""

    def __init__(self, message: str, summary: RunSummary) -> None:
        super().__init__(message)
        self.summary = summary


@dataclass
class Endpoints:
    """Where the run's components listen (printed at start-up; tests read them)."""

    redis: str = ""
    shards: list[list[str]] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)


class LocalPipeline:
    """Start, supervise and stop the local pipeline.

    Args:
        config: the run's configuration (``config.run.data`` must be set).
        out: where start-up lines and the summary go (progress bars go to stderr).
        resume: the run goes on in an existing run directory (``--resume``); otherwise ``[run] run_dir``
            must not hold a run already.
        announce_compiling: say once on stderr when the kernels are not compiled yet (``saintpipe warmup``'s
            run, which is there to compile them, does not).

    Example::

        summary = LocalPipeline(load_pipeline_config(data=Path("data/demo"))).run()
        print(summary.test_score)
    """

    def __init__(self, config: PipelineConfig, out: TextIO | None = None, resume: bool = False,
                 announce_compiling: bool = True) -> None:
        if config.run.data is None:
            raise ValueError("config.run.data must name the dataset directory")
        self.config = config
        self.out = out or sys.stdout
        self.resume = resume
        self.endpoints = Endpoints()
        self.supervisor = Supervisor(interval=config.run.watch_interval_s,
                                     budget=RestartBudget(config.run.max_restarts, config.run.restart_window_s))
        self._t0 = time.monotonic()
        self.timeline = Timeline()  # when each part became ready, since the command started
        self._sampler_service: SamplerService | None = None
        self._trainers: TrainerGroup | None = None
        self._overran = False  # the trainers had not come back by max_seconds' deadline
        self.feature_cache = ""  # the trainers' cache sizes, for the summary
        self.normalization = ""  # how the samplers' coefficients were made, for the summary
        self.announce_compiling = announce_compiling  # say on stderr when the kernels must still be compiled

    @property
    def data_dir(self) -> Path:
        """The dataset directory, ``config.run.data`` (ValueError without one, as at construction)."""
        if self.config.run.data is None:
            raise ValueError("config.run.data must name the dataset directory")
        return self.config.run.data

    @property
    def _launched_trainers(self) -> TrainerGroup:
        """The trainers, once launched (AttributeError before, as their None's attributes raised)."""
        if self._trainers is None:
            raise AttributeError("the trainers have not been launched yet")
        return self._trainers

    # --- the run --------------------------------------------------------------------------------------
    def run(self) -> RunSummary:
        """Run to the end of training (or a signal, or a failure); returns the summary.

        Raises:
            RunFailed: a component failed for good (the message names it; its ``summary`` says what ran);
                everything was stopped.
            DatasetError, ConfigError: bad input, found before anything started.
        """
        from saintpipe.services.dataset.store import open_dataset

        dataset = open_dataset(self.data_dir)
        self.timeline.mark("dataset")
        if not kernels_cached():
            if self.announce_compiling:
                print("saintpipe: the kernels are not compiled yet: this run compiles them (once: later runs load "
                      "them from the cache; saintpipe warmup does it ahead)", file=sys.stderr, flush=True)
            self._precompile(dataset)
        summary = RunSummary(dataset=f"{dataset.manifest.name} ({dataset.num_nodes:,} nodes, "
                                     f"{dataset.num_edges:,} edges, {dataset.manifest.num_classes} classes)",
                             metric="F1-micro" if dataset.manifest.multilabel else "accuracy")
        self._prepare_run_dir(summary)
        sup = self.supervisor
        sup.install_signal_handlers()
        try:
            try:
                self._start_all(dataset)
                self._print_endpoints()
                sup.start_watching()
                self._train(summary)
            except Stopped:
                pass
            except BaseException:
                sup.request_stop()
                raise
            finally:
                try:
                    self._collect(summary)
                finally:  # whatever the summary hit, every component is stopped
                    sup.close()
                    summary.times.wall = time.monotonic() - self._t0
                    summary.startup = dict(self.timeline.marks)
        finally:
            sup.restore_signal_handlers()
        summary.restarts = [f"{e.component} at {e.at_s:g} s: {e.reason}" for e in sup.restarts]
        if sup.failure is not None:
            summary.failure = sup.failure
        elif sup.signal is not None:
            summary.stopped_by = sup.signal.name
        self._write_summary(summary)
        if sup.failure is not None:
            raise RunFailed(f"{sup.failure}; the pipeline was stopped", summary)
        return summary

    def _prepare_run_dir(self, summary: RunSummary) -> None:
        """The run directory (``[run] run_dir``, else a new one), its checkpoints/ and config.json.

        Raises:
            ConfigError: ``[run] run_dir`` already holds a run (and this is no resume), or cannot be created.
        """
        from saintpipe.core.errors import ConfigError
        from saintpipe.core.paths import new_run_dir
        from saintpipe.pipeline.run_dir import CHECKPOINTS, holds_a_run, write_config

        run, trainer = self.config.run, self.config.trainer
        if run.run_dir is None:
            run.run_dir = new_run_dir(self.config.pool.job_id)
        elif holds_a_run(run.run_dir) and not self.resume:
            raise ConfigError(f"[run] run_dir {run.run_dir}: already holds a run; go on with it with "
                              f"saintpipe run --resume {run.run_dir}, or choose another directory")
        try:
            run.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"[run] run_dir {run.run_dir}: cannot create it: {exc.strerror or exc}") from None
        run.run_dir = run.run_dir.resolve()
        run.data = Path(self.data_dir).resolve()  # config.json must name the same dataset from any directory
        if not run.checkpoints:
            trainer.checkpoint_dir = None
        elif trainer.checkpoint_dir is None:
            trainer.checkpoint_dir = run.run_dir / CHECKPOINTS
        write_config(run.run_dir, self.config)
        summary.run_dir = str(run.run_dir)
        summary.checkpoint_dir = str(trainer.checkpoint_dir) if trainer.checkpoint_dir else ""

    def _write_summary(self, summary: RunSummary) -> None:
        from saintpipe.pipeline.run_dir import write_summary

        try:
            write_summary(Path(summary.run_dir), summary.to_json())
        except OSError as exc:  # the summary is still printed; a full disk must not hide how the run ended
            log.warning("cannot write %s/summary.json: %s", summary.run_dir, exc)

    def _checkpoint(self) -> None:
        """Between start-up steps: stop early if asked to, or if something already died."""
        self.supervisor.check_now()
        if self.supervisor.stop_requested.is_set():
            raise Stopped()

    def _start_all(self, dataset) -> None:
        self._start_services(dataset)
        # Trainer actors load torch and assemble themselves while the samplers estimate the normalization.
        self._launch_trainers(dataset)
        self._start_samplers(dataset)
        self._checkpoint()
        self._start_trainers()
        self._checkpoint()

    def _start_services(self, dataset) -> None:
        """Redis, the feature shards and Ray: what the samplers and the trainers need (an embedded pipeline
        for the loader starts these and the samplers)."""
        # Redis, the feature shards and Ray need nothing of each other: they start at once, Redis and the
        # shards on threads (they spawn a process each and wait for it to answer), Ray here, on the main
        # thread (ray.init installs signal handlers, which only the main thread may). The threads live as long
        # as the run: a child's parent-death signal fires when the thread that spawned it ends, not the process.
        from saintpipe.services.pool.redis_server import RedisServer

        starting = futures.ThreadPoolExecutor(2, thread_name_prefix="start")
        self.supervisor.on_stop("start-up threads", lambda: starting.shutdown(wait=False))  # stopped last
        # Registered here, before the parts register theirs from their threads, so that they are stopped in
        # this order whatever the threads' timing: the job's shared-memory slots go after every process of the
        # run (Ray's leftovers reaped: a live owner's slot is never swept), then Redis. Without Redis the sweep
        # still runs: it may already be down, and the next run deletes the job's keys.
        server = RedisServer(self.config.pool.url, own_process_group=True)  # Ctrl-C reaches it through us, last
        self.supervisor.on_stop("redis", server.stop)
        self.supervisor.on_stop("shared-memory slots", lambda: self._sweep_slots(server))
        redis = starting.submit(self._start_redis, server)
        shards = starting.submit(self._start_shards, dataset)
        try:
            self._start_ray()
        finally:
            errors = [f.exception() for f in (redis, shards)]  # both end before anything is stopped
        for error in errors:
            if error is not None:
                raise error
        self._checkpoint()

    # --- components -------------------------------------------------------------------------------------
    def _precompile(self, dataset) -> None:
        """Compile the kernels that need neither Ray nor a sampler in a process beside the start-up (the cache
        is cold): :mod:`saintpipe.pipeline.precompile`."""
        from saintpipe.core.procutil import terminate
        from saintpipe.pipeline.precompile import start_precompile

        samplers = self.config.samplers
        process = start_precompile(Path(dataset.path), samplers.sampler.model_dump(mode="json"), samplers.graph)
        self.supervisor.on_stop("kernel precompile", lambda: terminate(process, grace=1.0))

    def _sweep_slots(self, server: RedisServer) -> None:
        """Remove the job's shared-memory slots on ``server`` (nothing when it never started)."""
        from saintpipe.core.errors import InvalidArgument
        from saintpipe.services.pool.shared_memory import sweep

        try:
            url = server.url
        except InvalidArgument:  # the run stopped before Redis started: no slot was made
            return
        sweep(url, self.config.pool.job_id)

    def _start_redis(self, server: RedisServer) -> None:
        from saintpipe.services.pool.connection import redact_url
        from saintpipe.services.pool.pool import SubgraphPool
        from saintpipe.services.sampler_service.sequence import delete_sequences

        server.start()
        self.redis_url = server.url
        self.endpoints.redis = redact_url(server.url)
        if server.external:
            # A job id reused on a shared Redis must not hand this run another run's subgraphs.
            with SubgraphPool.from_config(self.config.pool, url=server.url) as pool:
                pool.delete_job()
            delete_sequences(self.config.pool.model_copy(update={"url": server.url}))
        else:
            # Restarted on its port, from its append-only file: the pool's entries survive it.
            self.supervisor.watch_pid("redis-server", lambda: server.pid, f"127.0.0.1:{server.port}",
                                      restart=server.restart)
        self.redis = server
        self.timeline.mark("redis", detail=self.endpoints.redis)

    def _start_shards(self, dataset) -> None:
        from saintpipe.services.feature_shard.launch import LocalShards

        extra = ["--metrics-port", "0"] if self.config.run.metrics else []
        shards = LocalShards(self.data_dir, dataset.manifest.num_shards, extra_args=extra,
                             replicas=self.config.run.shard_replicas, own_process_group=True)
        self.supervisor.on_stop("feature shards", shards.stop)
        for k, replicas in enumerate(shards.processes):
            for r, p in enumerate(replicas):
                name = f"feature shard {p.shard}" + (f" replica {r}" if len(replicas) > 1 else "")
                # Restarted on the same port with the same data; clients retry meanwhile.
                # (mypy cannot type a lambda with default arguments: the ignores below.)
                self.supervisor.watch_process(name, lambda k=k, r=r: shards.processes[k][r].process,  # type: ignore[misc]
                                              p.address, restart=lambda k=k, r=r: shards.restart(k, r))  # type: ignore[misc]
                if p.metrics_url:
                    self.endpoints.metrics[name] = p.metrics_url
        self.shards = shards
        self.endpoints.shards = shards.addresses
        self.timeline.mark("feature shards", detail=f"{len(shards.processes)} shard(s)")

    def _start_ray(self) -> None:
        import ray

        from saintpipe.core.reaper import start_reaper
        from saintpipe.core.ray_cluster import connect_ray

        cpus = self.config.ray_cpus()
        verbose = logging.getLogger().isEnabledFor(logging.INFO)
        # Ray's agents outlive a killed run by a minute: the reaper ends them with it (saintpipe.core.reaper).
        reaper = start_reaper()
        if reaper is not None:
            self.supervisor.on_stop("ray's leftovers", reaper.stop)  # after ray.shutdown (reverse order)
        with reaper.marking() if reaper is not None else contextlib.nullcontext():
            connect_ray("local", num_cpus=cpus, log_to_driver=verbose,
                        logging_level=logging.INFO if verbose else logging.WARNING, configure_logging=verbose)
        self.supervisor.on_stop("ray", ray.shutdown)
        self.supervisor.install_signal_handlers()  # ray.init installs its own SIGTERM handler
        if not verbose:
            _route_ray_error_pushes_to_the_log()
        self.timeline.mark("ray", detail=f"{cpus} CPUs")

    def _start_samplers(self, dataset) -> None:
        from saintpipe.services.sampler_service.service import SamplerService

        cfg = self.config.sampler_service_config(Path(self.data_dir), self.redis_url, self.config.cores(),
                                                 num_train=int(dataset.splits["train"].size))
        service = SamplerService(cfg)
        self.supervisor.on_stop("sampler service", service.stop)
        service.start()
        self.supervisor.watch("sampler service", lambda: service.failure)
        self._sampler_service = service
        self.normalization = _describe_normalization(cfg.normalization_method(), service.normalization_reused,
                                                     cfg.sampler.kind)
        if service.graph == "train":  # [samplers] graph: the summary says which protocol trained
            self.normalization += "; subgraphs from the training graph (validation and test nodes never sampled)"
        if service.metrics_url:
            self.endpoints.metrics["samplers"] = service.metrics_url
        self.timeline.mark("sampler workers", detail=f"{cfg.workers} worker(s); normalization {self.normalization}")

    def _launch_trainers(self, dataset) -> None:
        from saintpipe.trainer.actor import TrainerGroup
        from saintpipe.trainer.assemble import TrainerSpec

        cfg = self.config
        # The shards require the token LocalShards made for them; the trainers read it from its file.
        # Training batches' self-loops follow the samplers' graph (the training graph's degrees for "train").
        trainer_cfg = cfg.trainer.model_copy(update={"feature_token_file": self.shards.token_file,
                                                     "sample_graph": cfg.samplers.graph})
        spec = TrainerSpec(job=cfg.pool.job_id, dataset_dir=str(Path(self.data_dir).resolve()), pool_url=self.redis_url,
                           feature_addresses=self.shards.addresses, config=trainer_cfg, pool=cfg.pool,
                           metrics_port=0 if cfg.run.metrics else None, metrics_host=cfg.run.metrics_host,
                           output_dir=str(cfg.run.run_dir) if cfg.run.run_dir else None)
        cache = cfg.feature_cache_rows(dataset.num_nodes)
        self.feature_cache = (f"{cache.static_rows:,} pinned + {cache.lru_rows:,} LRU rows of "
                              f"{dataset.num_nodes:,}") if cache.enabled else ""
        from saintpipe.core.memory import available_memory
        from saintpipe.trainer.eval_memory import spill_warning

        warning = spill_warning(dataset.num_nodes, dataset.manifest.feature_dim, cfg.trainer.model,
                                available_memory())
        if warning:  # said before training, not discovered an hour into the first validation
            print(f"saintpipe: warning: {warning}", file=sys.stderr, flush=True)
        # Threaded actors, so that progress() answers while run() trains; one torch thread each unless
        # [trainer] threads says otherwise: Ray gives each one CPU. Until _start_trainers registers their stop,
        # ray.shutdown ends them.
        self._trainers = TrainerGroup(spec, cfg.run.trainers, threads=1, max_concurrency=4,
                                      cache=cache if cache.enabled else None)
        # They assemble themselves (torch, the graph, the model, the feature client) while the sampler service
        # starts: _start_trainers collects it. With a deadline, rank 0 estimates a full-graph evaluation after its
        # first step (the budget's reserve for the final one).
        self._trainers.begin(estimate_evaluation=cfg.run.max_seconds is not None)

    def _start_trainers(self) -> None:
        trainers = self._launched_trainers
        self.supervisor.on_stop("trainers", trainers.shutdown)  # registered last: stopped first
        trainers.start(timeout=self.config.run.startup_timeout_s,
                       estimate_evaluation=self.config.run.max_seconds is not None)
        self.timeline.mark("trainer")
        self.supervisor.watch("trainers", lambda: Failure(*found) if (found := trainers.failure()) else None,
                              restart=self._restart_trainers)
        self.endpoints.metrics.update(trainers.metrics_urls)
        if (resumed := trainers.progress()).steps:
            print(f"trainers resumed from step {resumed.steps} (epoch {resumed.epoch}) of the checkpoint in "
                  f"{self.config.trainer.checkpoint_dir}", flush=True, file=self.out)

    def _restart_trainers(self) -> None:
        self._launched_trainers.restart(timeout=self.config.run.startup_timeout_s)
        step = self._launched_trainers.progress().steps
        where = f"from step {step} of its latest checkpoint" if step else "from the start (no checkpoint yet)"
        print(f"saintpipe: trainers resumed {where}", file=self.supervisor.out, flush=True)

    def _print_endpoints(self) -> None:
        e = self.endpoints
        lines = [f"redis            {e.redis}"]
        lines += [f"feature shard {k}  {', '.join(replicas)}" for k, replicas in enumerate(e.shards)]
        service = self._sampler_service.config if self._sampler_service else None
        workers = service.workers if service else 0
        if service is None or service.workers_per_process == 1:
            lines.append(f"sampler workers  {workers} (Ray actors)")
        else:
            processes = -(-workers // service.workers_per_process)
            lines.append(f"sampler workers  {workers} (a thread each in {plural(processes, 'Ray actor')})")
        lines.append(f"trainers         {self.config.run.trainers} (Ray actors)")
        if e.metrics:
            lines.append("metrics endpoints (Prometheus):")
            lines += [f"  {name:<16} {url}" for name, url in e.metrics.items()]
        print("\n".join(lines), flush=True, file=self.out)

    # --- training ---------------------------------------------------------------------------------------
    def _train(self, summary: RunSummary) -> None:
        """Follow training to its end; with ``[run] max_seconds``, end it in time for the final evaluation
        (:mod:`saintpipe.pipeline.budget`) and stop waiting once the run's deadline has passed."""
        sup, trainers = self.supervisor, self._launched_trainers
        bars = EpochBars(self.config.trainer.epochs, enabled=self.config.run.progress)
        limit = self.config.run.max_seconds
        budget = RunBudget(limit, self._t0) if limit is not None else None
        summary.times.startup = time.monotonic() - self._t0
        started = time.monotonic()
        print(f"training started ({summary.times.startup:.1f} s after start-up began)", flush=True, file=self.out)
        if budget is not None:
            trainers.cut_evaluation_at(budget.to_wall(budget.evaluation_cut))
        sup.enable_restarts()
        finishing = False
        try:
            while not sup.stop_requested.wait(0.25):
                sup.restart_pending()  # here, in the thread the children's lifetimes are tied to
                progress = trainers.progress()
                bars.update(progress)
                for part, at in (("first subgraph", progress.first_subgraph_at), ("first step", progress.first_step_at)):
                    if not math.isnan(at):
                        self.timeline.mark(part, at=at)
                if progress.done:
                    # Did it end, or did a rank fail (a restart, or the end of the run)? Look before leaving.
                    sup.check_now()
                    if sup.restart_under_way:
                        continue
                    break
                if budget is None:
                    continue
                now = time.monotonic()
                if not finishing:
                    evaluation_s = trainers.evaluation_seconds()
                    needed = trainers.final_evaluation_needed
                    end = budget.training_end(evaluation_s if needed else 0.0)
                    summary.time_budget = budget.describe(summary.times.startup, end, evaluation_s, needed)
                    if now >= end:
                        summary.stopped_by = f"max_seconds ({limit:g} s, the final evaluation included)"
                        trainers.finish()  # ends the loop early; the trainers still score the best weights
                        finishing = True
                elif now >= budget.deadline:  # the evaluation was cut at its deadline and has not come back
                    self._overran = True
                    break
            if not sup.stop_requested.is_set() and not self._overran:
                trainers.wait()
                bars.update(trainers.progress())
        finally:
            bars.close()
            summary.training_seconds = time.monotonic() - started

    def _collect(self, summary: RunSummary) -> None:
        """Fill the summary from whatever ran (also after an interruption)."""
        t = summary.times
        summary.pool = self._pool_account()
        if self._sampler_service is not None:
            try:
                stats = self._sampler_service.stats()
                summary.sampler_workers = len(stats.workers)
                summary.subgraphs_sampled = stats.subgraphs
                t.sampling = sum(w.counters.sample_seconds_sum for w in stats.workers)
                t.sampler_pool_wait = sum(w.counters.pool_wait_seconds for w in stats.workers)
                summary.sampler_cpu_s, summary.sampler_producing_cpu_s = self.sampler_cpu_seconds()
                drawn = sum(w.counters.subgraphs for w in stats.workers)
                if drawn:
                    summary.subgraph_nodes = sum(w.counters.nodes for w in stats.workers) / drawn
                    summary.subgraph_edges = sum(w.counters.edges for w in stats.workers) / drawn
            except Exception as exc:  # stopping anyway: a partial summary beats none
                log.debug("sampler stats unavailable: %s", exc)
        if self._trainers is not None:
            summary.trainers = self.config.run.trainers
            summary.feature_cache = self.feature_cache
            summary.normalization = self.normalization
            result = self._trainers.result()
            if result is None:  # interrupted, or past the deadline: what the trainers did so far, unscored
                result = self._trainers.snapshot()
            if result is not None:
                # Past the deadline, the trainer's final scoring was running when the run stopped waiting.
                summary.evaluation = ("cut at the deadline" if self._overran and result.evaluation == "not run"
                                      else result.evaluation)
                summary.evaluation_estimate_s = result.evaluation_estimate_seconds
                summary.final_evaluation_s = result.final_evaluation_seconds
                summary.subgraphs_trained, summary.trainer_device = result.subgraphs, result.device
                for name in ("test_score", "val_score", "epochs", "steps", "feature_gathers", "feature_rows",
                             "feature_cache_hits", "feature_bytes", "step_losses", "step_epochs", "best_val_epoch",
                             "resumed_from_step"):  # the step losses and epochs are trainer 0's
                    setattr(summary, name, getattr(result, name))
                summary.val_history = [[epoch, score] for epoch, score in result.val_history]
                for name in TimeBreakdown.TRAINER_FIELDS:  # the trainers' figures; the wall clock is the run's
                    if name != "wall":
                        setattr(t, name, getattr(result.times, name))
                if result.stopped_early and summary.stopped_by == "finished":
                    summary.stopped_by = "early stopping (validation stopped improving)"
            else:
                p = self._trainers.progress()
                summary.epochs, summary.steps, summary.subgraphs_trained = p.epoch, p.steps, p.subgraphs
        if math.isnan(summary.test_score) and summary.stopped_by == "finished" and self.supervisor.failure:
            summary.stopped_by = "failure"


    def sampler_cpu_seconds(self) -> tuple[float, float]:
        """What the sampler workers cost in CPU seconds so far: ``(process, producing)``, their processes' over
        their lives as the OS counts them, and the part while they produced as the workers count it (NaN
        before the samplers started).

        Raises:
            whatever the sampler service's stats raise (Ray gone).
        """
        if self._sampler_service is None:
            return math.nan, math.nan
        process = self._sampler_service.process_cpu_seconds()
        producing = sum(w.counters.cpu_seconds for w in self._sampler_service.stats().workers)
        return process, producing

    def _pool_account(self) -> PoolAccount | None:
        """Where every subgraph the samplers produced went, while Redis still holds the job (None: it cannot say)."""
        from saintpipe.services.pool.pool import SubgraphPool

        url = getattr(self, "redis_url", None)
        if url is None:
            return None
        quick = self.config.pool.model_copy(update={"url": url, "reconnect_timeout": 2.0, "socket_timeout": 2.0})
        try:
            with SubgraphPool.from_config(quick, url=url) as pool:
                st = pool.stats()
                dead = pool.dead_letters(10) if st.dead_lettered else []
        except Exception as exc:  # noqa: BLE001 - Redis may be what failed: the summary goes on without it
            log.debug("pool stats unavailable: %s", exc)
            return None
        return PoolAccount(produced=st.produced, trained=st.acknowledged, waiting=st.depth, pending=st.pending,
                           dead_lettered=st.dead_lettered, redelivered=st.redelivered,
                           dead_letters=[f"{d.entry_id}: {d.reason}" for d in dead])


def _route_ray_error_pushes_to_the_log() -> None:
    """Ray prints every error its raylet pushes ("A worker died or was killed ...", a screenful) on stdout,
    whatever ``log_to_driver`` says. The supervisor already says in one line what died and what it does
    about it, so outside verbose mode those pushes go to this module's debug log instead."""
    import ray._private.worker as ray_worker

    printer = getattr(ray_worker, "print_to_stdstream", None)  # private: a Ray without it prints as before
    if printer is None or getattr(printer, "saintpipe_routed", False):
        return

    def route(data: dict, ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            log.debug("ray: %s", " ".join(data.get("lines", [])))
        else:
            printer(data, ignore_prefix)

    route.saintpipe_routed = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = route


def run_pipeline(config: PipelineConfig, out: TextIO | None = None) -> RunSummary:
    """Run the local pipeline with ``config``; see :class:`LocalPipeline`."""
    return LocalPipeline(config, out=out).run()


def _describe_normalization(method: str, reused: bool | None, kind: str) -> str:
    """One line for the summary: which estimator made the samplers' coefficients."""
    what = {"exact": f"exact (closed-form probabilities of the {kind} sampler)",
            "online": f"online (the {kind} sampler's prior, refined from what the workers produce)",
            "smoothed": "smoothed (pre-sampled counts shrunk toward the prior)",
            "reference": "reference (pre-sampled counts with GraphSAINT's floors)",
            "none": "none (plain mean aggregation)"}.get(method, method)
    return what + (", reused from the dataset" if reused else "")
