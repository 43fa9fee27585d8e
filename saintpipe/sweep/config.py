"""The sweep file: ``saintpipe run``'s sections, shared by every trial, plus ``[sweep]`` and its search space.

A sweep file is a ``saintpipe run`` config file (``[pool]``, ``[samplers]``, ``[trainer]`` as the trials'
defaults, ``[run]``) with a ``[sweep]`` section::

    [sweep]
    trials = 4            # random draws per grid combination (total: trials x combinations)
    concurrent = 2        # trials at a time (default: the cores the samplers leave)
    scheduler = "asha"    # or "none"
    grace_period = 1      # ASHA: validations before a trial may be stopped
    reduction_factor = 2  # ASHA: keeps the best 1/reduction_factor at each rung
    seed = 0              # of the random draws

    [sweep.space]
    "model.lr" = {loguniform = [1e-3, 1e-1]}
    "model.dropout" = {choice = [0.0, 0.1, 0.3]}
    "model.hidden" = {grid = [[128, 128], [256, 256]]}

Every key of the space is a dotted ``[trainer]`` field; every value is checked against the trainer's own
validation before anything starts (:func:`check_space`), and :func:`expand` draws the trial list from
``seed`` up front: the sweep registers the pool groups of the first trials to run before the samplers put
anything, and each later trial's as an earlier one ends (:mod:`saintpipe.sweep.driver`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pydantic
from pydantic import Field

from saintpipe.core.config import StrictModel, deep_merge, load_config
from saintpipe.core.errors import ConfigError
from saintpipe.core.seeds import Seed
from saintpipe.pipeline.config import PipelineConfig, RunConfig, SamplersSection
from saintpipe.services.pool.config import PoolConfig
from saintpipe.trainer.config import TrainerConfig

KINDS = ("choice", "grid", "uniform", "loguniform", "randint")
RANGES = ("uniform", "loguniform", "randint")
# [trainer] fields the sweep sets for each trial itself: a space may not vary them.
SWEEP_OWNED = {"checkpoint_dir": "the sweep keeps each trial's checkpoints in its trial directory ([run] checkpoints)",
               "feature_token_file": "the sweep's feature shards make their own token (running ones: set it in "
                                     "[trainer])",
               "sample_graph": "it follows [samplers] graph, shared by the trials"}
# Sections shared by every trial, for the message that refuses a key of theirs in the space.
SHARED: dict[str, tuple[type[pydantic.BaseModel], str]] = {
    section: (model, f"{kind} settings are shared by the sweep's trials: set them in [{section}]")
    for section, model, kind in (("samplers", SamplersSection, "sampler"), ("pool", PoolConfig, "pool"),
                                 ("run", RunConfig, "run"))}


class SweepSection(StrictModel):
    """``[sweep]``: how many trials, how many at a time, the scheduler and the search space."""

    trials: int = Field(1, ge=1, le=10_000, description="random draws of the space per grid combination (the "
                                                         "sweep runs trials x combinations)")
    concurrent: int | None = Field(None, ge=1, le=1024, description="trials at a time; none: the cores the "
                                                                    "samplers leave (at least 1)")
    metric: Literal["val_score"] = Field("val_score", description="what the trials are ranked by: the "
                                                                 "validation score (accuracy or F1-micro), higher "
                                                                 "is better")
    scheduler: Literal["asha", "none"] = Field("asha", description="asha: stop the trials that fall behind at "
                                                                   "each rung; none: every trial runs to its end")
    grace_period: int = Field(1, ge=1, le=1_000_000, description="ASHA: validations a trial runs before it may "
                                                                 "be stopped")
    reduction_factor: int = Field(2, ge=2, le=1000, description="ASHA: at each rung the best 1/reduction_factor "
                                                                "of the trials go on")
    seed: Seed = Field(0, description="seed of the random draws of the space (the same seed, the same trials)")
    features: str | None = Field(None, description="the feature shards of a pipeline that runs already (a "
                                 "compose stack, a Helm release), as serve trainer's --features "
                                 "(\"h:p;h:p\"): the sweep then uses that pipeline's Redis ([pool] url or "
                                 "SAINTPIPE_REDIS_URL), samplers (job [pool] job_id) and dataset ([run] data) "
                                 "instead of starting its own; none: it starts its own")
    space: dict[str, dict[str, Any]] = Field(default_factory=dict, description="dotted [trainer] field -> "
                                             "{choice|grid = [values]} or {uniform|loguniform|randint = [low, "
                                             "high]}")


class SweepConfig(PipelineConfig):
    """A sweep file: the shared pipeline sections and ``[sweep]``."""

    sweep: SweepSection = Field(default_factory=SweepSection)

    def trials_at_a_time(self) -> int:
        """``[sweep] concurrent``, else the trainer slots the samplers leave on the run's cores (at least 1);
        on running services (``[sweep] features``) the samplers run elsewhere: the cores."""
        if self.sweep.concurrent is not None:
            return self.sweep.concurrent
        cores = self.cores()
        if self.sweep.features is not None:
            return cores
        return max(1, cores - self.sampler_workers(cores))

    def services_config(self) -> PipelineConfig:
        """The shared services' configuration: this file less [sweep], with a trainer slot per concurrent trial
        (the samplers take the cores left)."""
        concurrent = self.trials_at_a_time()
        run = self.run.model_copy(update={"trainers": min(concurrent, 64)})
        workers = self.samplers.workers if self.samplers.workers is not None else max(1, self.cores() - concurrent)
        samplers = self.samplers.model_copy(update={"workers": workers})
        fields = {name: getattr(self, name) for name in PipelineConfig.model_fields}
        return PipelineConfig.model_construct(**{**fields, "run": run, "samplers": samplers})


@dataclass(frozen=True)
class Dimension:
    """One key of the space: a dotted trainer field and how its values are chosen."""

    key: str
    kind: str
    values: tuple[Any, ...]

    def draw(self, rng: np.random.Generator) -> Any:
        """A value for one trial (grid keys are not drawn: :func:`expand` walks them)."""
        if self.kind == "choice":
            return self.values[int(rng.integers(len(self.values)))]
        low, high = self.values
        if self.kind == "uniform":
            return float(rng.uniform(low, high))
        if self.kind == "loguniform":
            return float(math.exp(rng.uniform(math.log(low), math.log(high))))
        return int(rng.integers(low, high))  # randint: high excluded


@dataclass(frozen=True)
class Trial:
    """One trial of the sweep: its id (also its pool group and its directory's name) and its settings."""

    trial_id: str
    settings: dict[str, Any]
    trainer: TrainerConfig = field(compare=False)


def nested(key: str, value: Any) -> dict[str, Any]:
    """``"model.lr", 0.01`` -> ``{"model": {"lr": 0.01}}``."""
    for part in reversed(key.split(".")):
        value = {part: value}
    return value


def _field_problem(key: str) -> str | None:
    """Why ``key`` is no trainer field the space may vary, or None."""
    parts = key.split(".")
    if parts[0] in SHARED:
        return SHARED[parts[0]][1]
    for shared, message in SHARED.values():
        if parts[0] in shared.model_fields and parts[0] not in TrainerConfig.model_fields:
            return message
    if parts[0] in SWEEP_OWNED:
        return f"set by the sweep for each trial: {SWEEP_OWNED[parts[0]]}"
    model: type[pydantic.BaseModel] = TrainerConfig
    for i, part in enumerate(parts):
        info = model.model_fields.get(part)
        if info is None:
            where = ".".join(parts[:i]) or "[trainer]"
            return f"not a [trainer] field ({where} has {', '.join(model.model_fields)})"
        annotation = info.annotation
        last = i == len(parts) - 1
        if not last:
            if not (isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)):
                return f"{'.'.join(parts[:i + 1])} has no fields of its own"
            model = annotation
        elif isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
            return f"a section, not a field: name one of its fields ({key}.{next(iter(annotation.model_fields))}, ...)"
    return None


def _trainer_with(base: dict[str, Any], settings: dict[str, Any]) -> TrainerConfig:
    merged = base
    for key, value in settings.items():
        merged = deep_merge(merged, nested(key, value))
    return TrainerConfig.model_validate(merged)


def _value_problem(base: dict[str, Any], key: str, value: Any) -> str | None:
    """What the trainer's own validation says of ``key = value`` over the [trainer] defaults, or None."""
    try:
        _trainer_with(base, {key: value})
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        return f"{value!r} is refused by [trainer] {key}: {err['msg']}"
    return None


def check_space(config: SweepConfig) -> list[Dimension]:
    """The space's dimensions, each checked: a trainer field, a non-empty list or a range that can be sampled,
    and values the trainer field accepts.

    Raises:
        ConfigError: one line per problem, each naming its key (``sweep.space."model.lr": ...``).
    """
    space = config.sweep.space
    if not space:
        raise ConfigError("sweep.space: empty: name at least one [trainer] field to vary, e.g. "
                          "\"model.lr\" = {loguniform = [1e-3, 1e-1]}")
    base = config.trainer.model_dump()
    problems: list[str] = []
    dims: list[Dimension] = []
    for key, spec in space.items():
        name = f'sweep.space."{key}"'
        where = _field_problem(key)
        if where is not None:
            problems.append(f"{name}: {where}")
            continue
        given = [k for k in spec if k in KINDS]
        unknown = [k for k in spec if k not in KINDS]
        if unknown or len(given) != 1:
            problems.append(f"{name}: give exactly one of {', '.join(KINDS)}, got {', '.join(spec) or 'nothing'}")
            continue
        kind = given[0]
        values = spec[kind]
        if not isinstance(values, list) or not values:
            problems.append(f"{name}: {kind} needs a non-empty list, got {values!r}")
            continue
        if kind in RANGES:
            problem = _range_problem(kind, values)
            if problem:
                problems.append(f"{name}: {problem}")
                continue
        refused = [p for v in values if (p := _value_problem(base, key, v))]
        if refused:
            problems.append(f"{name}: {refused[0]}")
            continue
        dims.append(Dimension(key, kind, tuple(values)))
    if problems:
        raise ConfigError("; ".join(problems))
    return dims


def _range_problem(kind: str, values: list[Any]) -> str | None:
    if len(values) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return f"{kind} needs [low, high] (two numbers), got {values!r}"
    low, high = values
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{kind} needs finite bounds, got {values!r}"
    if kind == "randint" and not (isinstance(low, int) and isinstance(high, int)):
        return f"randint needs integer bounds, got {values!r}"
    if low >= high:
        return f"{kind} cannot be sampled: low {low!r} >= high {high!r}"
    if kind == "loguniform" and low <= 0:
        return f"loguniform cannot be sampled: low {low!r} <= 0 (its logarithm)"
    return None


def expand(config: SweepConfig, dims: list[Dimension] | None = None) -> list[Trial]:
    """The sweep's trials, in order: every grid combination, ``trials`` times each, the other keys drawn from
    ``[sweep] seed`` (deterministic: the same file, the same trials).

    Raises:
        ConfigError: a drawn combination the trainer refuses (naming the keys), or more than 10,000 trials.
    """
    dims = check_space(config) if dims is None else dims
    grid = [d for d in dims if d.kind == "grid"]
    drawn = [d for d in dims if d.kind != "grid"]
    combinations = math.prod(len(d.values) for d in grid)
    total = combinations * config.sweep.trials
    if total > 10_000:
        raise ConfigError(f"sweep.trials: {config.sweep.trials} x {combinations} grid combinations = {total} "
                          "trials, more than 10,000")
    rng = np.random.default_rng(config.sweep.seed)
    base = config.trainer.model_dump()
    trials: list[Trial] = []
    for combination in itertools.product(*(d.values for d in grid)):
        for _ in range(config.sweep.trials):
            settings = {d.key: v for d, v in zip(grid, combination, strict=True)}
            settings.update({d.key: d.draw(rng) for d in drawn})
            try:
                trainer = _trainer_with(base, settings)
            except pydantic.ValidationError as exc:
                err = exc.errors()[0]
                raise ConfigError(f"sweep.space: the combination {settings} is refused by [trainer] "
                                  f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
            trials.append(Trial(f"trial-{len(trials):03d}", settings, trainer))
    return trials


def load_sweep_config(path: Path, data: Path | None = None, environ: dict[str, str] | None = None) -> SweepConfig:
    """The sweep file, with ``SAINTPIPE_<SECTION>__<FIELD>`` and ``--data`` over it; its space checked.

    Raises:
        ConfigError: naming the file, variable or key at fault (one line).
    """
    config = load_config(SweepConfig, path, {"run": {"data": data}} if data is not None else None, environ)
    check_space(config)
    return config
