"""Run a sweep: one set of services, a pool group per trial, the trials as Ray Tune trials.

The services are the loader's embedded pipeline (:class:`~saintpipe.loader.embedded.EmbeddedPipeline`:
Redis, the feature shards, a local Ray, the sampler service), which registers the first trials' pool groups
before its samplers start, so those trials train on the very same stream of subgraphs from its first entry;
or, with ``[sweep] features``, a pipeline that runs already (:mod:`saintpipe.sweep.services`: the trials'
groups join its stream, and the groups nobody reads make way for them). A group that is registered but not read holds the pool
back (an entry is released only once every registered group is done with it), so only the trials that can
run at once have a group: when a trial ends, the next trial's group is registered before the ended one is
removed (the job never falls back to its default group while trials remain) and the next trial, which
starts in order, reads from there.

Each trial is a Ray Tune function trainable (:func:`_trial`, one CPU) that assembles its trainer through
:func:`saintpipe.trainer.assemble.assemble_trainer` with the trial's ``[trainer]`` settings, its pool
group and its run directory ``<sweep dir>/trials/<trial>/``, and reports each validation to Tune (the
scheduler, ASHA by default, stops the trials that fall behind). The driver's :class:`_GroupKeeper` (a Tune
callback) reads the trial's pool account and removes its group as soon as it ends, whatever ended it, and
adds its row to the results table (:mod:`saintpipe.sweep.results`).

A trial whose trainer dies (its Tune actor killed, or an exception) is Tune's to retry, within ``saintpipe run``'s
restart budget (``[run] max_restarts`` per ``restart_window_s``, per trial): the retried trial assembles its
trainer again, which resumes from its latest checkpoint and takes back what its group still held for it, while
the other trials train on. Only the failure past the budget ends the trial (its group removed, its row
``failed``).

With ``[run] metrics`` on (the default), each trial's trainer serves its Prometheus endpoint on a free port
while it trains, its series labelled with the trial (``trial``), and the sweep lists the endpoints, the shared
services' too, in ``<sweep dir>/prometheus/*.json`` for Prometheus's file-based discovery
(:mod:`saintpipe.sweep.targets`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from saintpipe.core.config import deep_merge, load_config, read_config_file
from saintpipe.core.errors import ConfigError
from saintpipe.core.files import write_atomic
from saintpipe.pipeline.config import PipelineConfig
from saintpipe.pipeline.restarts import RestartBudget
from saintpipe.pipeline.run_dir import CHECKPOINTS, stored_config, write_config
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.sweep import targets
from saintpipe.sweep.config import SweepConfig, Trial, check_space, expand
from saintpipe.sweep.results import TRIALS, Results, TrialRow, best_test_score
from saintpipe.sweep.services import SweepServices, check_running, open_services
from saintpipe.trainer.assemble import TrainerSpec

log = logging.getLogger(__name__)

CONFIG = "config.json"  # the sweep's resolved configuration (what --resume reads back)
SUMMARY = "summary.json"
RESULT = "result.json"  # in a trial's directory: what its trainer returned (absent: it did not finish)
PID = "trainer.pid"  # in a trial's directory: the process its trainer runs in now (rewritten on each restart)


@dataclass
class SweepSummary:
    """How the sweep went: its directory, its table, whether it was interrupted, the pool groups of trials
    that had not ended when it did (a trial's group is released as it ends; the last one with the job), and
    the shared samplers' CPU seconds (:meth:`LocalPipeline.sampler_cpu_seconds`; NaN when not read)."""

    sweep_dir: Path
    results: Results
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    interrupted: bool = False
    groups_left: list[str] = field(default_factory=list)
    sampler_cpu_s: float = math.nan
    sampler_producing_cpu_s: float = math.nan

    def best(self) -> TrialRow | None:
        """The trial with the best validation among those that did not fail (a failed trial's model is what
        its trainer had when it died past its budget); a failed one only when no other trial validated."""
        rows = [r for r in self.results.sorted() if not math.isnan(r.best_val)]
        return next((r for r in rows if r.stopped_by != "failed"), rows[0] if rows else None)

    def to_json(self) -> str:
        best = self.best()
        cpu = {"sampler_cpu_s": self.sampler_cpu_s, "sampler_producing_cpu_s": self.sampler_producing_cpu_s}
        return json.dumps({"sweep_dir": str(self.sweep_dir), "ran": self.ran, "skipped": self.skipped,
                           "interrupted": self.interrupted, "groups_left": self.groups_left,
                           "best_trial": best.trial if best else None,
                           "best_run_dir": best.run_dir if best else None,
                           **{k: None if math.isnan(v) else v for k, v in cpu.items()}}, indent=2)


def load_sweep(config_file: Path | None, data: Path | None, resume: Path | None,
               environ: dict[str, str] | None = None, flags: dict[str, Any] | None = None) -> SweepConfig:
    """The sweep's configuration: ``config_file`` (over the stored one of ``resume``), the environment,
    ``--data`` and the other ``flags`` (sections as nested dicts); its space checked, and with ``[sweep]
    features`` what running services need besides.

    Raises:
        ConfigError: one line naming the file, variable or key at fault.
    """
    base = None
    if resume is not None:
        stored = resume / CONFIG
        if not stored.is_file():
            raise ConfigError(f"--resume {resume}: not a sweep directory (no {CONFIG})")
        base = (str(stored), read_config_file(stored))
    elif config_file is None:
        raise ConfigError("--config: a sweep file is needed ([sweep] and [sweep.space]; docs/how-to/sweeps.md)")
    given = deep_merge(flags or {}, {"run": {"data": data}} if data is not None else {})
    config = load_config(SweepConfig, config_file, given or None, environ, base=base)
    check_space(config)
    check_running(config, environ)
    return config


def run_sweep(config: SweepConfig, sweep_dir: Path, resume: bool = False, out: TextIO | None = None) -> SweepSummary:
    """Run the trials of ``config`` not done yet in ``sweep_dir``; returns how it went.

    Raises:
        ConfigError: bad input (found before anything starts).
        ServiceUnavailable: a shared service did not come up.
    """
    import sys

    out = out or sys.stdout
    trials = expand(config)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    sweep_dir = sweep_dir.resolve()
    results = Results.read(sweep_dir) if resume else Results(sweep_dir)
    done = {r.trial for r in results.rows.values() if r.done}
    todo = [t for t in trials if t.trial_id not in done]
    summary = SweepSummary(sweep_dir, results, ran=[t.trial_id for t in todo], skipped=sorted(done))
    write_atomic(sweep_dir / CONFIG, stored_config(config).encode(), mode=0o600)  # [sweep] too
    if done:
        print(f"resuming: {len(done)} trial(s) done before ({', '.join(sorted(done))}), {len(todo)} to run "
              f"({'from their checkpoints where they have one' if config.run.checkpoints else 'from scratch'})",
              file=out, flush=True)
    if not todo:
        return summary
    concurrent = min(config.trials_at_a_time(), len(todo))
    print(f"sweep: {len(trials)} trial(s), {len(todo)} to run, {concurrent} at a time, scheduler "
          f"{config.sweep.scheduler}; sweep directory {sweep_dir}", file=out, flush=True)
    services = open_services(config, [t.trial_id for t in todo], concurrent)
    interrupted = threading.Event()
    previous = {s: signal.signal(s, lambda *_: interrupted.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with services:
            for s in previous:  # ray.init installed its own
                signal.signal(s, lambda *_: interrupted.set())
            specs = {t.trial_id: _trial_spec(config, services, t, sweep_dir) for t in todo}
            targets.clear(sweep_dir)  # a crashed sweep's, on --resume
            listed = targets.write_services(sweep_dir, services.metrics)
            if listed is not None:
                print(f"metrics: Prometheus file_sd targets in {listed.parent}/*.json (the services, and each "
                      "trial's trainer while it trains)", file=out, flush=True)
            with SubgraphPool.from_config(config.pool, url=services.redis_url) as pool:
                keeper = _GroupKeeper(pool, results, todo, concurrent, interrupted, out,
                                      RestartBudget(config.run.max_restarts, config.run.restart_window_s),
                                      config.run.checkpoints, sweep_dir)
                if not interrupted.is_set():
                    _tune(config, specs, todo, concurrent, keeper, interrupted, sweep_dir)
                # groups of trials that had not ended (a trial's group is released when it ends)
                summary.groups_left = services.leave(pool, {t.trial_id for t in todo}, keeper.ended_trials)
                try:
                    summary.sampler_cpu_s, summary.sampler_producing_cpu_s = services.sampler_cpu_seconds()
                except Exception as exc:  # noqa: BLE001 - a figure for benchmarks: the sweep's results stand without it
                    log.warning("the samplers' CPU seconds could not be read: %s", exc)
    finally:
        targets.clear(sweep_dir)  # the services are stopped: no endpoint is left
        for s, handler in previous.items():
            signal.signal(s, handler)
    summary.interrupted = interrupted.is_set()
    write_atomic(sweep_dir / SUMMARY, (summary.to_json() + "\n").encode())
    return summary


def _trial_spec(config: SweepConfig, services: SweepServices, trial: Trial, sweep_dir: Path) -> TrainerSpec:
    """The trial's trainer: its settings, its pool group, its run directory (with the config.json ``saintpipe
    run`` writes, so that ``saintpipe predict <trial dir>`` and ``embed`` work there)."""
    run_dir = sweep_dir / TRIALS / trial.trial_id
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = trial.trainer.model_copy(update={
        "feature_token_file": services.feature_token_file, "sample_graph": config.samplers.graph,
        "checkpoint_dir": run_dir / CHECKPOINTS if config.run.checkpoints else None})
    run = config.run.model_copy(update={"run_dir": run_dir, "data": services.data_dir.resolve(), "trainers": 1})
    fields = {name: getattr(config, name) for name in PipelineConfig.model_fields}
    write_config(run_dir, PipelineConfig.model_construct(**{**fields, "run": run, "trainer": trainer}))
    return TrainerSpec(job=config.pool.job_id, dataset_dir=str(services.data_dir.resolve()),
                       pool_url=services.redis_url, feature_addresses=services.feature_addresses, config=trainer,
                       pool=config.pool, output_dir=str(run_dir), group=trial.trial_id, trial=trial.trial_id,
                       metrics_port=0 if config.run.metrics else None, metrics_host=config.run.metrics_host)


def _trial(config: dict[str, Any], specs: dict[str, TrainerSpec], sweep_dir: str) -> None:
    """One trial, in its Tune actor: train on its group's stream, report each validation, keep the result;
    its metrics endpoint listed for Prometheus while it trains."""
    from ray import tune

    from saintpipe.trainer.assemble import assemble_trainer
    from saintpipe.trainer.metrics import serve_metrics

    spec = specs[config["trial"]]
    assert spec.output_dir is not None
    write_atomic(Path(spec.output_dir) / PID, f"{os.getpid()}\n".encode())

    def report(epoch: float, score: float, step: int) -> None:
        # reported_at: when, so that the moment ASHA stopped a trial on this report can be read back
        tune.report({"val_score": score, "epoch": epoch, "step": step, "reported_at": time.time()})

    # The trial serves its process's metrics itself from its first moment (the trainer's series join them as
    # it assembles): listed for Prometheus while it starts as well as while it trains.
    http = None
    if spec.metrics_port is not None:
        http = serve_metrics(spec.metrics_port, spec.metrics_host)
        targets.write_trial(Path(sweep_dir), spec.trial, f"http://{spec.metrics_host}:{http.server_address[1]}")
    try:
        result = assemble_trainer(spec, threads=1, on_validation=report).run()
    finally:
        targets.remove_trial(Path(sweep_dir), spec.trial)
        if http is not None:
            http.shutdown()
            http.server_close()
    out = {"test_score": result.test_score, "val_score": result.val_score, "steps": result.steps,
           "epochs": result.epochs, "stopped_early": result.stopped_early,
           "resumed_from_step": result.resumed_from_step}
    write_atomic(Path(spec.output_dir) / RESULT, json.dumps(out).encode())


class _GroupKeeper:
    """Keeps the pool's groups to the trials that run or start next, and the results table, as trials end."""

    def __init__(self, pool: SubgraphPool, results: Results, todo: list[Trial], concurrent: int,
                 interrupted: threading.Event, out: TextIO, budget: RestartBudget, checkpoints: bool,
                 sweep_dir: Path) -> None:
        self.pool, self.results, self.interrupted, self.out, self.budget = pool, results, interrupted, out, budget
        self.sweep_dir = sweep_dir
        self.resumes = "from its latest checkpoint" if checkpoints else "from scratch ([run] checkpoints is off)"
        self.trials = {t.trial_id: t for t in todo}
        self.waiting = [t.trial_id for t in todo[concurrent:]]  # in Tune's order; no group yet
        self.ended_trials: set[str] = set()
        self.restarts = {t.trial_id: 0 for t in todo}
        self.carried: dict[str, dict[str, int]] = {}  # accounts of groups removed while their trial restarted
        self.lock = threading.Lock()

    def restarts_left(self, trial_id: str) -> int:
        with self.lock:
            return self.budget.left(trial_id, time.monotonic())

    def restarted(self, trial_id: str, reason: str) -> None:
        """Tune retries the trial (the budget allowed it). Its group is removed until the trial starts again,
        so that what it held is released at once and the other trials train on instead of waiting at the
        pool's capacity for a trainer that is starting; the restarted trainer resumes from its checkpoint and
        reads the stream from where it then is (subgraphs are drawn independently: the ones it missed change
        nothing but which ones it saw). Its account so far is kept and added to the next one's. A job's only
        group stays (nobody else waits on it), and the restarted trainer takes back what it held."""
        with self.lock:
            self.budget.allow(trial_id, time.monotonic())
            self.restarts[trial_id] += 1
            used = self.budget.used(trial_id)
            if self.pool.groups() != [trial_id]:
                self.carried[trial_id] = self._account(trial_id)
                self.pool.remove_group(trial_id)
        print(f"{trial_id}: {reason}: restarting it {self.resumes} ({used} of {self.budget.describe()})",
              file=self.out, flush=True)

    def started(self, trial_id: str) -> None:
        with self.lock:  # Tune calls it before the trial's function runs, a restarted trial's too
            if trial_id in self.waiting:  # Tune started it out of order: it joins the stream from here
                self.waiting.remove(trial_id)
            self.pool.add_group(trial_id)

    def _account(self, trial_id: str) -> dict[str, int]:
        """The group's account, with what it counted before its trial's restarts."""
        before = self.carried.get(trial_id, {})
        if trial_id not in self.pool.groups():  # removed at a restart, and the sweep ended before it started again
            return dict(before)
        s = self.pool.stats(group=trial_id)
        now = {"produced": s.produced, "acknowledged": s.acknowledged, "waiting": s.depth,
               "pending": s.pending, "dead_lettered": s.dead_lettered}
        return {k: v + before.get(k, 0) for k, v in now.items()}

    def ended(self, trial_id: str, run_dir: Path, error: str = "") -> None:
        with self.lock:
            account = self._account(trial_id)
            if self.waiting and not self.interrupted.is_set():  # never zero groups while trials remain
                self.pool.add_group(self.waiting.pop(0))
            # The job's last group stays (the pool refuses to remove it: producers would fill a stream no
            # group reads); it goes with the services when the sweep ends.
            groups = self.pool.groups()
            if trial_id in groups and groups != [trial_id]:
                self.pool.remove_group(trial_id)
            self.ended_trials.add(trial_id)
            targets.remove_trial(self.sweep_dir, trial_id)  # the trial removes it itself, unless it was killed
            self.results.add(_row(self.trials[trial_id], run_dir, account, error, self.interrupted.is_set(),
                                  self.restarts[trial_id]))
        if error:
            print(f"{trial_id}: failed: {error}", file=self.out, flush=True)

    def failure(self, trial_id: str, reason: str, error_file: str) -> str:
        """The final failure's words for the table: what happened, how often, the budget, Tune's record."""
        times = self.restarts[trial_id] + 1
        return (f"{reason} {times} time{'s' if times != 1 else ''}, restart budget {self.budget.max_restarts} per "
                f"{self.budget.window_s:g} s (Ray Tune's error file: {error_file})")


def _reason(trial: Any) -> str:
    """What ended the trial's trainer, in a few words: its process died, or what it raised."""
    from ray.exceptions import RayActorError, RayTaskError

    error = trial.get_pickled_error()
    if isinstance(error, RayActorError) or error is None:
        return "trainer killed"
    cause = error.cause if isinstance(error, RayTaskError) else error
    words = str(cause).strip().splitlines()
    return f"trainer failed ({type(cause).__name__}{': ' + words[0][:200] if words else ''})"


def _row(trial: Trial, run_dir: Path, account: dict[str, int], error: str, interrupted: bool,
         restarts: int) -> TrialRow:
    """The trial's line: from its result.json when its trainer finished, else from its metrics.jsonl."""
    best, test, steps = math.nan, math.nan, 0
    finished: dict[str, Any] | None = None
    if (run_dir / RESULT).is_file():
        finished = json.loads((run_dir / RESULT).read_text())
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            row = json.loads(line)
            steps = max(steps, int(row.get("step") or 0))
            if row.get("val_score") is not None and (math.isnan(best) or row["val_score"] > best):
                best = float(row["val_score"])
    if error:
        stopped_by = "failed"
    elif finished is not None:
        stopped_by = "early stopped" if finished["stopped_early"] else "finished"
        best, test, steps = float(finished["val_score"]), float(finished["test_score"]), int(finished["steps"])
    else:
        stopped_by = "interrupted" if interrupted else "ASHA"
    if finished is None:  # Tune stopped it before its final scoring: its best weights' own test score
        test = best_test_score(run_dir)
    return TrialRow(trial.trial_id, trial.settings, best, test, steps, stopped_by, str(run_dir), account, error,
                    restarts)


def _tune(config: SweepConfig, specs: dict[str, TrainerSpec], todo: list[Trial], concurrent: int,
          keeper: _GroupKeeper, interrupted: threading.Event, sweep_dir: Path) -> None:
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # the sweep's own handler ends it (and says so)
    # A dead trainer is the sweep's to report (one line, restarted or failed; the row names Tune's error file),
    # not a traceback on the console.
    os.environ["TUNE_PRINT_ALL_TRIAL_ERRORS"] = "0"
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    class Keeper(tune.Callback):
        """Tells the group keeper when a trial starts and ends (Tune pickles its callbacks with the experiment's
        state: the keeper, its lock and its pool stay out of the pickle)."""

        def __init__(self, keeper: _GroupKeeper | None) -> None:
            self.keeper = keeper

        def __getstate__(self) -> dict[str, Any]:
            return {"keeper": None}

        def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            if self.keeper is not None:
                self.keeper.started(trial.config["trial"])

        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            if self.keeper is not None:
                self.keeper.ended(trial.config["trial"], sweep_dir / TRIALS / trial.config["trial"])

        def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
            # Tune retries a failed trial while trial.max_failures allows; keep that to what the restart
            # budget's sliding window allows now, so Tune and `saintpipe run` decide alike.
            if self.keeper is not None:
                for trial in trials:
                    if trial.status == trial.RUNNING:
                        left = self.keeper.restarts_left(trial.config["trial"])
                        trial.max_failures = trial.num_failures + (1 if left else 0)

        def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            if self.keeper is not None:
                self.keeper.restarted(trial.config["trial"], _reason(trial))

        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            if self.keeper is not None:  # the failure past the budget (a recoverable one is on_trial_recover)
                trial_id = trial.config["trial"]
                self.keeper.ended(trial_id, sweep_dir / TRIALS / trial_id,
                                  error=self.keeper.failure(trial_id, _reason(trial), trial.error_file or "none"))

    class Interrupt(tune.Stopper):
        """Ends the whole experiment once the sweep was asked to stop (SIGINT, SIGTERM)."""

        def __init__(self, event: threading.Event | None) -> None:
            self.event = event

        def __getstate__(self) -> dict[str, Any]:
            return {"event": None}

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            return False

        def stop_all(self) -> bool:
            return self.event is not None and self.event.is_set()

    s = config.sweep
    if s.scheduler == "asha":
        longest = max(math.ceil(t.trainer.epochs / t.trainer.eval_every) for t in todo)
        scheduler: Any = ASHAScheduler(time_attr="training_iteration", grace_period=s.grace_period,
                                       reduction_factor=s.reduction_factor,
                                       # past the last validation: a trial's end is its own (result.json), not a cut
                                       max_t=max(longest, s.grace_period) + 1)
    else:
        scheduler = FIFOScheduler()
    trainable = tune.with_resources(tune.with_parameters(_trial, specs=specs, sweep_dir=str(sweep_dir)), {"cpu": 1})
    tuner = tune.Tuner(
        trainable, param_space={"trial": tune.grid_search([t.trial_id for t in todo])},
        tune_config=tune.TuneConfig(metric=s.metric, mode="max", scheduler=scheduler,
                                    max_concurrent_trials=concurrent),
        run_config=tune.RunConfig(name=f"tune-{time.strftime('%Y%m%d-%H%M%S')}", storage_path=str(sweep_dir),
                                  callbacks=[Keeper(keeper)], stop=Interrupt(interrupted), verbose=0,
                                  # per trial; Keeper.on_step_begin applies the window
                                  failure_config=tune.FailureConfig(max_failures=config.run.max_restarts)))
    tuner.fit()
