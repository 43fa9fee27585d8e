"""``saintpipe bench sweep``: sample once, train many. The same learning-rate configurations as one sweep and as
separate runs, one after another, on the same machine: the samplers' CPU per trained step, the wall clock, the
best test scores, and what ASHA and the pool groups did.

The sweep arm is one ``saintpipe sweep`` (every configuration a trial, ``--concurrent`` at a time, ASHA),
the separate arm one ``saintpipe run`` per configuration, one after another; both as a user runs them (new
processes, the demo dataset or ``--data``), with the same ``[trainer]``, ``[samplers]`` and ``[pool]``
settings and one Redis this command starts for both (each run a job of its own). The samplers' CPU is
measured, not estimated: the CPU seconds (user + system) of the sampler workers' processes over their
lives, as the OS counts them at the end of each sweep or run (its summary's ``sampler_cpu_s``); trained
steps are the trials' or runs' optimizer steps, summed. The separate arm's best configuration (by
validation) runs again with ``--seeds`` - 1 more seeds ([trainer] and [samplers] seed): the noise is the
spread (max - min) of its test scores over the seeds, and the best trial's test score is within the noise
when it differs from the best separate run's by no more than that. While the sweep runs, a thread polls
the job's pool groups: for each trial ASHA stopped, the seconds from the validation report it was stopped
on (reported_at in Tune's record) to its group's leaving the pool. Each sweep group's account (read just
before it was removed) and each run's must add up: produced = acknowledged + waiting + pending +
dead-lettered.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The configurations: [trainer] model.lr; the last learns nothing in a few epochs, for ASHA to stop.
LRS = (0.02, 0.01, 0.005, 1e-5)
# --quick: a structure check. One trial at a time, the hopeless one second: it meets the first trial's
# record at its first rung (so ASHA stops it for certain) while a third trial still needs the stream (so
# its group is removed, not kept as the job's last).
QUICK_LRS = (0.02, 1e-5, 0.01)
# The targets (issue 46): at most these.
TARGETS = {"sampler_cpu_per_step_ratio": 0.35, "wall_ratio": 0.7, "asha_group_gone_s": 5.0}
SWEEP_JOB = "bench-sweep"
POLL_S = 0.05


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer, real
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser(
        "sweep",
        help="the same configurations as one sweep and as separate runs: samplers' CPU per trained step, "
             "wall clock, best test scores, ASHA's stops and the pool groups' accounts",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--data", type=Path, help="dataset directory (default: the demo dataset)")
    parser.add_argument("--lrs", type=real(0, 10, min_open=True), nargs="+", metavar="LR",
                        help=f"the configurations' [trainer] model.lr, one trial and one run each (default "
                             f"{' '.join(map(str, LRS))}; --quick: {' '.join(map(str, QUICK_LRS))})")
    parser.add_argument("--epochs", type=integer(2, 10_000), help="[trainer] epochs (default 10; --quick 3)")
    parser.add_argument("--concurrent", type=integer(1, 64),
                        help="the sweep's trials at a time (default: all of them; --quick 1)")
    parser.add_argument("--seeds", type=integer(2, 100),
                        help="seeds of the separate arm's best configuration, for the noise (default 3: two more "
                             "runs; --quick 2)")
    parser.add_argument("--scheduler", choices=("asha", "none"), default="asha",
                        help="the sweep's scheduler (default asha). ASHA trains fewer steps than the separate "
                             "runs, which raises the sweep's CPU per step; none trains every trial to its end, "
                             "the same steps as the runs: what sharing the stream alone saves")
    parser.add_argument("--quick", action="store_true",
                        help="a short structure check: 3 configurations, 3 epochs, hidden [32, 32], one trial "
                             "at a time; its ratios say little")
    parser.add_argument("--workdir", type=Path, help="keep the sweep's and the runs' directories here (config files, "
                        "run and trial directories, Tune's records); default: a temporary directory, removed")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


@dataclass
class Setup:
    """What both arms run: the dataset, the configurations and the shared sections of their config files."""

    data: Path
    lrs: list[float]
    epochs: int
    concurrent: int
    seeds: int
    hidden: list[int] | None = None
    scheduler: str = "asha"

    def sections(self, job: str, seed: int = 0, lr: float | None = None) -> str:
        """``[run]``, ``[pool]``, ``[samplers]`` and ``[trainer]`` as both arms have them (TOML); a run's
        configuration adds its ``lr``, a sweep varies it."""
        model = [f"hidden = {json.dumps(self.hidden)}"] if self.hidden else []
        model += [f"lr = {lr!r}"] if lr is not None else []
        return (f"[run]\nprogress = false\nmetrics = false\n[pool]\njob_id = \"{job}\"\n"
                f"[samplers]\nworkers = 1\nseed = {seed}\n"
                f"[trainer]\nepochs = {self.epochs}\npatience = 0\nseed = {seed}\n"
                + ("[trainer.model]\n" + "\n".join(model) + "\n" if model else ""))


@dataclass
class GroupWatch:
    """A thread that polls a job's pool groups: when each was first seen and when it was gone."""

    url: str
    job: str
    seen: dict[str, float] = field(default_factory=dict)
    gone: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> GroupWatch:
        self._thread = threading.Thread(target=self._poll, name="group-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _poll(self) -> None:
        from saintpipe.services.pool.pool import SubgraphPool

        with SubgraphPool(self.url, self.job) as pool:
            while not self._stop.is_set():
                now = time.time()
                present = set(pool.groups())
                for group in present:
                    self.seen.setdefault(group, now)
                    self.gone.pop(group, None)  # registered again (a resumed trial)
                for group in self.seen.keys() - present:
                    self.gone.setdefault(group, now)
                self._stop.wait(POLL_S)


def _bench(args: argparse.Namespace) -> int:
    from saintpipe.core.report import emit_report
    from saintpipe.services.pool.redis_server import RedisServer

    data = args.data
    if data is None:
        from saintpipe.services.dataset.demo import ensure_demo_dataset

        data = ensure_demo_dataset()
    lrs = list(args.lrs or (QUICK_LRS if args.quick else LRS))
    setup = Setup(data=data, lrs=lrs, epochs=args.epochs or (3 if args.quick else 10),
                  concurrent=args.concurrent or (1 if args.quick else len(lrs)),
                  seeds=args.seeds or (2 if args.quick else 3),
                  hidden=[32, 32] if args.quick else None, scheduler=args.scheduler)
    env = dict(os.environ)
    # The kernels compile once, before either arm (a cold cache would land in the first one).
    subprocess.run([sys.executable, "-m", "saintpipe", "warmup", "--if-cold"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="saintpipe-bench-sweep-")))
        else:
            work = args.workdir / time.strftime("%Y%m%d-%H%M%S")
            work.mkdir(parents=True)
        redis = stack.enter_context(RedisServer(use_env=False))
        env["SAINTPIPE_REDIS_URL"] = redis.url  # both arms on this one Redis, each run a job of its own
        sweep = sweep_arm(setup, work, env, redis.url)
        runs = [run_once(setup, work / f"run-{i}", env, lr, job=f"bench-run-{i}") for i, lr in enumerate(lrs)]
        best = max(range(len(runs)), key=lambda i: _or(runs[i]["val_score"], -1.0))
        noise = [run_once(setup, work / f"seed-{s}", env, lrs[best], job=f"bench-seed-{s}", seed=s)
                 for s in range(1, setup.seeds)]
    rows, summary = figures(setup, sweep, runs, best, noise)
    params = {"data": str(data), "lrs": " ".join(map(str, lrs)), "epochs": setup.epochs,
              "scheduler": setup.scheduler,
              "concurrent": setup.concurrent, "seeds": setup.seeds, "sampler workers": 1,
              "hidden": setup.hidden or "the run's default", **({"workdir": str(work)} if args.workdir else {})}
    emit_report("sweep", rows, params=params, summary=summary, as_json=args.json,
                columns=["arm", "trainings", "wall_s", "subgraphs", "sampler_cpu_s", "producing_cpu_s", "steps",
                         "cpu_ms_per_step", "best_lr", "best_val", "best_test", "accounts_add_up"])
    return 0


def _or(value: Any, default: float) -> float:
    return default if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _saintpipe(args: list[str], env: dict[str, str], what: str) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "saintpipe", *args], env=env, capture_output=True, text=True)
    wall = time.monotonic() - began
    if done.returncode != 0:
        from saintpipe.core.errors import WorkerFailed

        lines = done.stderr.strip().splitlines() or ["no output"]
        said = [line for line in lines if line.startswith("saintpipe:")] or lines  # its own word, else its last
        signalled = " (SIGTERM: stopped from outside)" if done.returncode in (15, -15) else ""
        raise WorkerFailed(f"{what} exited {done.returncode}{signalled}: {said[-1]}")
    return done, wall


def sweep_arm(setup: Setup, work: Path, env: dict[str, str], url: str) -> dict[str, Any]:
    """One ``saintpipe sweep`` of every configuration, its pool groups watched; its figures."""
    config = work / "sweep.toml"
    grid = json.dumps(setup.lrs)
    config.write_text(setup.sections(SWEEP_JOB) + f"\n[sweep]\nconcurrent = {setup.concurrent}\nscheduler = "
                      f"\"{setup.scheduler}\"\ngrace_period = 1\nreduction_factor = 2\n\n[sweep.space]\n"
                      f"\"model.lr\" = {{grid = {grid}}}\n")
    sweep_dir = work / "sweep"
    with GroupWatch(url, SWEEP_JOB) as watch:
        _, wall = _saintpipe(["sweep", "--config", str(config), "--data", str(setup.data), "--sweep-dir",
                              str(sweep_dir)], env, "saintpipe sweep")
    summary = json.loads((sweep_dir / "summary.json").read_text())
    trials = json.loads((sweep_dir / "results.json").read_text())["trials"]
    reported = last_reports(sweep_dir)
    for t in trials:
        t["group_gone_s"] = (watch.gone[t["trial"]] - reported[t["trial"]]
                             if t["trial"] in watch.gone and t["trial"] in reported else math.nan)
        t["group_kept"] = t["trial"] in watch.seen and t["trial"] not in watch.gone
    return {"wall_s": wall, "summary": summary, "trials": trials}


def last_reports(sweep_dir: Path) -> dict[str, float]:
    """Each trial's last validation report to Tune (its ``reported_at``), from Tune's own records."""
    out: dict[str, float] = {}
    for record in sweep_dir.glob("tune-*/*/result.json"):
        for line in record.read_text().splitlines():
            result = json.loads(line)
            trial, at = result.get("config", {}).get("trial"), result.get("reported_at")
            if trial is not None and at is not None:
                out[trial] = max(out.get(trial, 0.0), float(at))
    return out


def run_once(setup: Setup, run_dir: Path, env: dict[str, str], lr: float, job: str, seed: int = 0) -> dict[str, Any]:
    """One ``saintpipe run --json`` of configuration ``lr``; its summary's figures and its wall clock."""
    run_dir.mkdir(parents=True)
    config = run_dir.parent / f"{run_dir.name}.toml"
    config.write_text(setup.sections(job, seed, lr))
    done, wall = _saintpipe(["run", "--json", "--data", str(setup.data), "--config", str(config), "--run-dir",
                             str(run_dir)], env, f"saintpipe run (lr {lr}, seed {seed})")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    pool = summary.get("pool") or {}
    adds_up = bool(pool) and pool["produced"] == (pool["trained"] + pool["waiting"] + pool["pending"]
                                                  + pool["dead_lettered"])
    return {"lr": lr, "seed": seed, "wall_s": wall, "steps": int(summary["steps"]),
            "subgraphs": int(pool.get("produced", 0)), "sampler_cpu_s": _or(summary.get("sampler_cpu_s"), math.nan),
            "producing_cpu_s": _or(summary.get("sampler_producing_cpu_s"), math.nan),
            "val_score": _or(summary.get("val_score"), math.nan), "test_score": _or(summary.get("test_score"), math.nan),
            "account_adds_up": adds_up}


def _adds_up(account: dict[str, int]) -> bool:
    return bool(account) and account["produced"] == (account["acknowledged"] + account["waiting"]
                                                     + account["pending"] + account["dead_lettered"])


def _per_step_ms(cpu: float, steps: int) -> float:
    return 1e3 * cpu / steps if steps else math.nan


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan  # NaN > 0 is False: NaN stays NaN


def _verdict(value: float, target: float) -> str:
    if math.isnan(value):
        return f"<= {target:g}: n/a"
    return f"<= {target:g}: {'met' if value <= target else 'NOT met'}"


def figures(setup: Setup, sweep: dict[str, Any], runs: list[dict[str, Any]], best: int,
            noise: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The report's rows (one per arm) and its summary: the ratios beside their targets, the test scores
    against the seeds' noise, ASHA's stops and the groups' accounts."""
    trials = sweep["trials"]
    lr_of = {t["trial"]: t["settings"]["model.lr"] for t in trials}
    scored = [t for t in trials if t["best_val"] is not None]
    top = max(scored, key=lambda t: t["best_val"]) if scored else None
    s_steps = sum(int(t["steps"]) for t in trials)
    s_cpu = _or(sweep["summary"].get("sampler_cpu_s"), math.nan)
    s_producing = _or(sweep["summary"].get("sampler_producing_cpu_s"), math.nan)
    sweep_row = {"arm": "sweep", "trainings": f"1 sweep, {len(trials)} trials", "wall_s": sweep["wall_s"],
                 # the job's count when the last trial's group was read (the samplers stop soon after)
                 "subgraphs": max((t["pool"].get("produced", 0) for t in trials), default=0),
                 "sampler_cpu_s": s_cpu, "producing_cpu_s": s_producing, "steps": s_steps,
                 "cpu_ms_per_step": _per_step_ms(s_cpu, s_steps),
                 "best_lr": lr_of[top["trial"]] if top else math.nan,
                 "best_val": _or(top["best_val"] if top else None, math.nan),
                 "best_test": _or(top["test_score"] if top else None, math.nan),
                 "accounts_add_up": f"{sum(_adds_up(t['pool']) for t in trials)}/{len(trials)} groups"}
    r_steps = sum(r["steps"] for r in runs)
    r_cpu = sum(r["sampler_cpu_s"] for r in runs)
    separate_row = {"arm": "separate", "trainings": f"{len(runs)} runs", "wall_s": sum(r["wall_s"] for r in runs),
                    "subgraphs": sum(r["subgraphs"] for r in runs),
                    "sampler_cpu_s": r_cpu, "producing_cpu_s": sum(r["producing_cpu_s"] for r in runs),
                    "steps": r_steps, "cpu_ms_per_step": _per_step_ms(r_cpu, r_steps), "best_lr": runs[best]["lr"],
                    "best_val": runs[best]["val_score"], "best_test": runs[best]["test_score"],
                    "accounts_add_up": f"{sum(r['account_adds_up'] for r in runs)}/{len(runs)} runs"}
    seeds = [runs[best]["test_score"], *(r["test_score"] for r in noise)]
    spread = max(seeds) - min(seeds)
    difference = sweep_row["best_test"] - separate_row["best_test"]
    stopped = [t for t in trials if t["stopped_by"] == "ASHA"]
    gone = [t["group_gone_s"] for t in stopped if not math.isnan(t["group_gone_s"])]
    # A stopped trial whose group was the job's last keeps it until the services stop (the pool refuses to
    # remove a job's last group): no time to give.
    kept = [t["trial"] for t in stopped if t["group_kept"]]
    cpu_ratio = _ratio(sweep_row["cpu_ms_per_step"], separate_row["cpu_ms_per_step"])
    wall_ratio = _ratio(sweep_row["wall_s"], separate_row["wall_s"])
    slowest = max(gone) if gone else math.nan
    summary: dict[str, Any] = {
        "sampler_cpu_per_step_ratio": cpu_ratio,  # sweep / separate
        "sampler_cpu_per_step_target": _verdict(cpu_ratio, TARGETS["sampler_cpu_per_step_ratio"]),
        # the whole, not per step: what the stream cost once against four times (ASHA's cut steps aside)
        "sampler_cpu_total_ratio": _ratio(s_cpu, r_cpu),
        "producing_cpu_per_step_ratio": _ratio(_per_step_ms(s_producing, s_steps),
                                               _per_step_ms(separate_row["producing_cpu_s"], r_steps)),
        "wall_ratio": wall_ratio,
        "wall_target": _verdict(wall_ratio, TARGETS["wall_ratio"]),
        "best_test_difference": difference,  # the best trial's test score - the best separate run's
        "seed_noise": spread,  # max - min test score of the best separate configuration over the seeds
        "seed_test_scores": seeds,
        "within_noise": abs(difference) <= spread,  # False when either is NaN
        "asha_stopped": ", ".join(f"{t['trial']} (lr {lr_of[t['trial']]:g}, test {_or(t['test_score'], math.nan):.4f})"
                                  for t in stopped) or "none",
        "asha_group_gone_s": slowest,  # the slowest of them: from the report ASHA stopped on to the group gone
        "asha_group_gone_target": _verdict(slowest, TARGETS["asha_group_gone_s"]),
        "asha_groups_kept_as_last": ", ".join(kept) or "none",
        "groups_left": len(sweep["summary"].get("groups_left") or []),
        "accounts_add_up": (all(_adds_up(t["pool"]) for t in trials) and all(r["account_adds_up"] for r in runs)
                            and all(r["account_adds_up"] for r in noise)),
    }
    return [sweep_row, separate_row], summary
