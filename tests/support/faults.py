"""The fault suite's harness: a ``saintpipe run`` with a fixed seed, a fault injected mid-run, and the checks.

Every fault test starts the real console script on a small demo dataset with
early stopping off (so training runs long enough to be hurt), waits until the
trainer has taken a few steps, injects its fault by hand (a signal to a
process of the run, a Redis pause, a garbage pool entry), waits for the run's
end and checks the outcome the policy promises (docs/how-to/faults.md):

* the run completes, with a test score within 2 points of an undisturbed run
  with the same seed (:func:`undisturbed_score`, measured once per session);
* every subgraph produced is accounted for: produced = trained + waiting +
  pending + dead-lettered (the summary's ``pool`` account);
* no process, listening port or ``/dev/shm`` file of the run is left.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import psutil

from tests.support.cli import saintpipe_command
from tests.support.pipeline import PipelineProcess, small_dataset, write_config

SHM = Path("/dev/shm")
SHM_PREFIXES = ("saintpipe-pool-", "saintpipe-features-")
SHM_KEPT = {"saintpipe-pool-namespace"}  # the /dev/shm identity marker stays by design
STARTUP_S = 150
RUN_S = 420
# Training long enough to be hurt mid-run (about 290 optimizer steps, 3 to 5 s of training on 2 cores) on a
# graph large enough (3,600 test nodes) and with a learning rate low enough that the score hardly depends on
# the order subgraphs come in: undisturbed runs with two sampler workers (whose order varies) agree within
# half a point. Every fault lies on training's path (the sampler worker, the only one on 2 cores; a shard
# every step gathers from; the pool's Redis; the trainer), so the run cannot end before the component is
# back, however short it is; the trainer tests kill past step 60 (checkpoints every 25), well inside the
# run. The best validation came at epoch 5 of 50 (test accuracy 0.998): 20 epochs score as 50 did, in 40 %
# of the training time.
EPOCHS = 20
SEED = 7

CONFIG = f"""
[run]
progress = false
{{run}}
[trainer]
epochs = {EPOCHS}
patience = 0
seed = {SEED}
checkpoint_every_steps = 25
[trainer.model]
lr = 0.003
[samplers]
norm_subgraphs = 16
[samplers.sampler]
roots = 300
"""


def fault_dataset(out: Path) -> Path:
    return small_dataset(out, nodes=12000)


def shm_files() -> set[str]:
    """saintpipe's files in /dev/shm now (the identity marker aside)."""
    try:
        names = {p.name for p in SHM.iterdir()}
    except OSError:
        return set()
    return {n for n in names if n.startswith(SHM_PREFIXES) and n not in SHM_KEPT}


class FaultRun(PipelineProcess):
    """One ``saintpipe run --json`` of the fault suite, with what /dev/shm held before it started."""

    def __init__(self, workdir: Path, dataset: Path, run: str = "", args: tuple[str, ...] = (),
                 home: Path | None = None) -> None:
        """``run``: extra lines of the config's [run] table."""
        self.shm_before = shm_files()
        cfg = write_config(workdir / "run.toml", CONFIG.replace("{run}", run))
        super().__init__(saintpipe_command(), ["run", "--data", str(dataset), "--config", str(cfg), "--json",
                                               *args],
                         workdir, env={"SAINTPIPE_HOME": str(home or workdir / "home")})
        self.started = time.monotonic()

    def training(self, steps: int = 3) -> "FaultRun":
        """Wait until training has started and taken ``steps`` steps."""
        self.wait_for_line(r"^training started", STARTUP_S)
        self.sample_tree(ports=True)
        self.wait_for_steps(steps, 120)
        self.sample_tree(ports=True)
        return self

    def summary(self) -> dict:
        """The summary the run printed with --json (its last JSON line)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise AssertionError(f"no JSON summary printed\n{self.output()}")

    def steps(self) -> float:
        """Optimizer steps so far, from trainer 0's metrics endpoint (0 when it does not answer)."""
        try:
            return self.scrape(self.metrics_urls()["trainer 0"]).get("saintpipe_trainer_steps_total", 0.0)
        except (OSError, KeyError):
            return 0.0

    def child(self, needle: str) -> psutil.Process:
        """The live descendant whose command line contains ``needle`` (a restarted one is found anew)."""
        self.sample_tree()
        for proc in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                if needle in " ".join(proc.cmdline()) and proc.status() != psutil.STATUS_ZOMBIE:
                    return proc
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
        raise AssertionError(f"no live child process runs {needle!r}\n{self.output()}")

    def kill(self, needle: str, sig: int = signal.SIGKILL) -> int:
        proc = self.child(needle)
        pid = proc.pid
        proc.send_signal(sig)
        return pid

    def finish(self, timeout: float = RUN_S) -> int:
        code = self.wait(timeout)
        self.sample_tree()
        return code

    def left_behind(self) -> list[str]:
        """Processes, ports and /dev/shm files of this run that outlived it."""
        deadline = time.monotonic() + 30  # the kernel may take a moment to reap SIGKILLed grandchildren
        while (alive := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.3)
        left = [f"process {p}" for p in alive]
        left += [f"port {p}" for p in self.open_ports()]
        left += [f"/dev/shm/{n}" for n in sorted(shm_files() - self.shm_before)]
        return left


def score(summary: dict) -> float:
    return float(summary["test_score"])


def assert_accounted(summary: dict, foreign: int = 0) -> dict:
    """produced = trained + waiting + pending + dead-lettered, with nothing unaccounted; returns the account.

    ``foreign``: entries added to the stream by hand (not produced by a sampler), which end dead-lettered.
    """
    account = summary.get("pool")
    assert account, f"the summary has no pool account: {summary}"
    parts = account["trained"] + account["waiting"] + account["pending"] + account["dead_lettered"]
    assert account["produced"] + foreign == parts, f"subgraphs unaccounted for: {account}"
    assert account["produced"] > 0 and account["trained"] > 0, account
    return account


def assert_completed_like(summary: dict, undisturbed: float, run: FaultRun) -> None:
    """Finished its epochs, scored within 2 points of the undisturbed run."""
    assert summary["stopped_by"] == "finished", run.output()
    assert summary["epochs"] == EPOCHS, run.output()
    assert abs(score(summary) - undisturbed) <= 0.02, (
        f"test score {score(summary):.4f} vs {undisturbed:.4f} undisturbed\n{run.output()}")


def wait_until(predicate, timeout: float, what: str, run: FaultRun) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if run.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s\n{run.output()}")
        run.sample_tree()
        time.sleep(0.3)


def restarts(summary: dict, component: str) -> list[str]:
    return [r for r in summary.get("restarts", []) if re.match(re.escape(component), r)]
