"""The run directory: what one ``saintpipe run`` leaves on disk, and finding things in it again.

Layout::

    <run dir>/                 default $SAINTPIPE_HOME/runs/<YYYYmmdd-HHMMSS>-<job>; [run] run_dir / --run-dir
      config.json              the resolved configuration (what ``--resume`` reads back; mode 0600: it may hold
                               the pool's URL with its password)
      checkpoints/             latest.pt + step-N.pt (unless [run] checkpoints = false or [trainer] checkpoint_dir)
      metrics.jsonl            one line per validation / epoch end, appended as training goes
      best.pt, final.pt        the model at the best validation and at the end (saintpipe.trainer.run_dir.model_file)
      summary.json             the end-of-run summary (also written when the run failed or was stopped)

The trainer (rank 0) writes metrics.jsonl, best.pt and final.pt
(:mod:`saintpipe.trainer.run_dir.outputs`); the runner writes config.json and summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from saintpipe.core.errors import ConfigError
from saintpipe.core.files import write_atomic
from saintpipe.pipeline.config import RUNNER_OWNED, PipelineConfig
from saintpipe.trainer.run_dir import BEST, FINAL, LATEST, METRICS

CONFIG = "config.json"
SUMMARY = "summary.json"
CHECKPOINTS = "checkpoints"
MODELS = {"best": BEST, "final": FINAL}


def stored_config(config: PipelineConfig) -> str:
    """``config`` as the JSON text of config.json, which :func:`~saintpipe.pipeline.config.load_pipeline_config`
    reads back to the same configuration."""
    return config.model_dump_json(exclude={"samplers": set(RUNNER_OWNED)}, indent=2) + "\n"


def write_config(run_dir: Path, config: PipelineConfig) -> Path:
    return write_atomic(run_dir / CONFIG, stored_config(config).encode(), mode=0o600)


def write_summary(run_dir: Path, summary_json: str) -> Path:
    return write_atomic(run_dir / SUMMARY, (summary_json + "\n").encode())


def holds_a_run(path: Path) -> bool:
    """Whether ``path`` is a run directory (its config.json is written first, at start-up)."""
    return (path / CONFIG).is_file()


@dataclass(frozen=True)
class ResumeTarget:
    """What ``saintpipe run --resume PATH`` goes on from.

    Attributes:
        run_dir: the run directory (None: PATH is a bare checkpoint directory of no run directory; the resumed
            run gets a new one). config: its config.json, when there is one (the run's stored configuration).
        checkpoint_dir: where latest.pt is.
    """

    run_dir: Path | None
    config: Path | None
    checkpoint_dir: Path


def resume_target(path: Path) -> ResumeTarget:
    """Where to resume from, for ``--resume PATH``: a run directory, or a checkpoint directory (a run's
    ``checkpoints/`` or its ``[trainer] checkpoint_dir``).

    Raises:
        ConfigError: one line naming PATH: not a run or checkpoint directory, or nothing to resume from.
    """
    flag = f"--resume {path}"
    if not path.is_dir():
        raise ConfigError(f"{flag}: no such directory; pass the run directory printed at the end of the run")
    path = path.resolve()  # config.json and the summary name it from anywhere
    if (path / LATEST).is_file():  # a checkpoint directory; its run directory, if it is one's checkpoints/
        parent = path.parent
        if holds_a_run(parent):
            return ResumeTarget(parent, parent / CONFIG, path)
        return ResumeTarget(parent if path.name == CHECKPOINTS else None, None, path)
    if not holds_a_run(path):
        raise ConfigError(f"{flag}: neither a run directory (no {CONFIG}) nor a checkpoint directory (no {LATEST})")
    stored = _stored_checkpoint_dir(path / CONFIG)
    # Its own checkpoints/ first: a run directory moved elsewhere still names the old place in its config.
    for ckpt in (path / CHECKPOINTS, stored):
        if ckpt is not None and (ckpt / LATEST).is_file():
            return ResumeTarget(path, path / CONFIG, ckpt)
    if stored is None:
        raise ConfigError(f"{flag}: nothing to resume from: the run kept no checkpoints ([run] checkpoints = false)")
    raise ConfigError(f"{flag}: nothing to resume from: no checkpoint yet in {stored} (the run stopped before its "
                      "first one)")


def _stored_checkpoint_dir(config: Path) -> Path | None:
    """``[trainer] checkpoint_dir`` of a stored config.json (None: the run kept no checkpoints)."""
    from saintpipe.core.config import read_config_file

    trainer = read_config_file(config).get("trainer") or {}
    value = trainer.get("checkpoint_dir") if isinstance(trainer, dict) else None
    return Path(value) if isinstance(value, str) and value else None


def model_path(run_dir: Path, which: str = "best") -> Path:
    """``best.pt`` or ``final.pt`` of a run directory (or ``run_dir`` itself when it is a model file).

    Raises:
        ConfigError: one line: not a directory, not a run directory, or the model is not there (with why).
    """
    if run_dir.is_file():
        return run_dir
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such run directory (saintpipe run prints its run directory at the end)")
    path = run_dir / MODELS[which]
    if path.is_file():
        return path
    if not holds_a_run(run_dir):
        raise ConfigError(f"{run_dir}: not a run directory (no {CONFIG}, no {MODELS[which]})")
    if which == "final" and (run_dir / BEST).is_file():
        why = "the run did not finish (interrupted or failed); --checkpoint best has the best weights so far"
    elif not (run_dir / METRICS).is_file():
        why = "the run stopped before its first validation"
    else:
        why = "the run has not validated a model yet"
    raise ConfigError(f"{path}: no model: {why}")
