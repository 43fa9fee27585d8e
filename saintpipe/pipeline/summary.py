"""What a local run reports at its end: scores, amounts of work, and where the time went."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from saintpipe.core.report import plural
from saintpipe.trainer.losses import LossSpike, loss_spike
from saintpipe.trainer.timing import TimeBreakdown


@dataclass
class PoolAccount:
    """Where the subgraphs the samplers produced went: produced = trained + waiting + pending + dead-lettered.

    Attributes:
        produced: put into the pool. trained: acknowledged by a trainer after its step. waiting: in the pool,
        never delivered. pending: delivered, not acknowledged (a trainer held it when the run ended).
        dead_lettered: moved to the dead-letter stream (undecodable, bytes lost, or delivered too often).
        redelivered: deliveries of subgraphs taken back from a trainer that died or held them too long.
    """

    produced: int = 0
    trained: int = 0
    waiting: int = 0
    pending: int = 0
    dead_lettered: int = 0
    redelivered: int = 0
    dead_letters: list[str] = field(default_factory=list)  # the newest few: entry id and reason

    @property
    def unaccounted(self) -> int:
        """Produced subgraphs that are none of the above (0 unless one was lost)."""
        return self.produced - self.trained - self.waiting - self.pending - self.dead_lettered


@dataclass
class RunSummary:
    """The figures ``saintpipe run`` prints when it ends (also as JSON with ``as_dict``).

    Attributes:
        dataset: the dataset's name and size. test_score/val_score: accuracy (F1-micro for multi-label data)
        of the best-validation weights; NaN when the run ended before scoring. stopped_by: why training
        ended (finished, early stopping, max_seconds, SIGINT, ...). times: the trainers' time breakdown with
        the sampler workers' figures, the start-up and the whole command's wall clock.
        normalization: how the samplers made GraphSAINT's coefficients (estimator, reused or not).
        trainer_device: the torch device the trainers ran on (trainer 0's; "" before it reported).
        feature_cache: the trainers' feature cache sizes ("" when off). feature_gathers, feature_rows,
        feature_cache_hits, feature_bytes: the training steps' feature gathers, summed over the trainers
        (evaluation's excluded): gathers, rows requested, rows the cache served, bytes fetched from the shards.
        step_losses: every optimizer step's training loss, in order; with several data-parallel trainers, trainer
        0's (each rank steps once per optimizer step, on its own subgraph, so it has exactly ``steps`` entries).
        step_epochs: the 0-based epoch each of those steps belonged to. val_history: ``[epoch, score]`` of every
        validation (epoch fractional for one in mid-epoch). best_val_epoch: the epoch of the validation whose
        weights were kept (``val_score`` is theirs; their test score came from the same pass). Empty/NaN when
        training never reported back (interrupted before its end).
        run_dir: the run directory (models, metrics history, config, this summary as summary.json).
        subgraph_nodes, subgraph_edges: the mean nodes and adjacency entries of the subgraphs the workers drew
            (NaN: none drawn; edges 0 for node sets, induced by the trainers).
        sampler_cpu_s: CPU seconds (user + system) of the sampler workers' processes over their lives, start-up
            included, as the OS counts them at the run's end (NaN: not readable here).
            sampler_producing_cpu_s: the part of it while they produced, as the workers count it.
        startup: when each part became ready, in seconds since the command started (dataset, redis, feature
            shards, ray, sampler workers, trainer, first subgraph, first step).
        checkpoint_dir: where the checkpoints went ("" without). resumed_from_step: the checkpoint's step a
        resumed run went on from (-1: started afresh); the trainers' figures then cover the whole run, both parts
        (scores, epochs, steps, losses, validations, subgraphs trained on), the rest (times, throughputs, the
        samplers' and the pool's counts) this part.
        evaluation: how the final full-graph scoring went ("complete", "cut at the deadline", "not run"; ""
        before the trainers reported). final_evaluation_s: its seconds. evaluation_estimate_s: what the trainer
        last expected one full-graph evaluation to take (NaN: not asked, no max_seconds). time_budget: how
        ``[run] max_seconds`` was split ("" without a limit).
    """

    dataset: str
    metric: str = "accuracy"
    test_score: float = math.nan
    val_score: float = math.nan
    epochs: int = 0
    steps: int = 0
    subgraphs_trained: int = 0
    subgraphs_sampled: int = 0
    sampler_workers: int = 0
    trainers: int = 0
    training_seconds: float = 0.0
    stopped_by: str = "finished"
    times: TimeBreakdown = field(default_factory=TimeBreakdown)
    pool: PoolAccount | None = None
    restarts: list[str] = field(default_factory=list)
    failure: str = ""
    checkpoint_dir: str = ""
    run_dir: str = ""
    resumed_from_step: int = -1
    feature_cache: str = ""
    normalization: str = ""
    trainer_device: str = ""
    feature_gathers: int = 0
    feature_rows: int = 0
    feature_cache_hits: int = 0
    feature_bytes: int = 0
    best_val_epoch: float = math.nan
    step_losses: list[float] = field(default_factory=list)
    step_epochs: list[int] = field(default_factory=list)
    val_history: list[list[float]] = field(default_factory=list)
    evaluation: str = ""
    evaluation_estimate_s: float = math.nan
    final_evaluation_s: float = math.nan
    time_budget: str = ""
    startup: dict[str, float] = field(default_factory=dict)
    subgraph_nodes: float = math.nan
    subgraph_edges: float = math.nan
    sampler_cpu_s: float = math.nan
    sampler_producing_cpu_s: float = math.nan

    @property
    def loss_spike(self) -> LossSpike:
        """The largest and median step loss after the first epoch, and their ratio."""
        return loss_spike(self.step_losses, self.step_epochs, after_epoch=1)

    @property
    def loss_spike_ratio(self) -> float:
        """Largest step loss / median step loss after the first epoch (NaN: no step after it)."""
        return self.loss_spike.ratio

    @property
    def sampler_throughput(self) -> float:
        """Subgraphs per second the samplers produced while training ran."""
        return self.subgraphs_sampled / self.training_seconds if self.training_seconds > 0 else math.nan

    @property
    def training_throughput(self) -> float:
        """Subgraphs per second the trainers trained on."""
        return self.subgraphs_trained / self.training_seconds if self.training_seconds > 0 else math.nan

    @property
    def feature_cache_hit_rate(self) -> float:
        """Share of the feature rows the training steps requested that the trainers' cache served."""
        return self.feature_cache_hits / self.feature_rows if self.feature_rows else math.nan

    @property
    def feature_bytes_per_step(self) -> float:
        """Feature bytes fetched from the shards per training step (per subgraph trained on)."""
        return self.feature_bytes / self.feature_gathers if self.feature_gathers else math.nan

    def as_dict(self) -> dict:
        out = asdict(self)
        out["sampler_throughput"] = self.sampler_throughput
        out["training_throughput"] = self.training_throughput
        out["feature_cache_hit_rate"] = self.feature_cache_hit_rate
        out["feature_bytes_per_step"] = self.feature_bytes_per_step
        out["loss_spike_ratio"] = self.loss_spike_ratio
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), default=float)


def _startup(marks: dict[str, float]) -> str:
    """``first step at 7.9 s (dataset 0.6, redis 1.0, ...)``: when each part became ready, in order."""
    rest = sorted(((part, at) for part, at in marks.items() if part != "first step"), key=lambda kv: kv[1])
    head = f"first step at {marks['first step']:.1f} s" if "first step" in marks else "no step"
    return f"{head}: " + ", ".join(f"{part} {at:.1f}" for part, at in rest) if rest else head


def _unaccounted(n: int) -> str:
    if n > 0:
        return f"  ({n:,} UNACCOUNTED FOR)"
    if n < 0:  # dead letters of entries no sampler produced: something else wrote into the job's stream
        return f"  ({-n:,} of them added to the stream by something other than a sampler)"
    return ""


def _score(value: float) -> str:
    return "n/a (not scored)" if math.isnan(value) else f"{value:.4f}"


def _bytes(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def _features(s: RunSummary) -> list[tuple[str, str]]:
    """The feature cache's rows: hit rate and bytes per step of the training steps' gathers."""
    if not s.feature_gathers:
        return []
    cache = f"  (cache: {s.feature_cache})" if s.feature_cache else "  (no cache)"
    rate = "n/a" if math.isnan(s.feature_cache_hit_rate) else f"{100 * s.feature_cache_hit_rate:.1f}%"
    return [("feature cache hit rate", f"{rate}{cache}"),
            ("feature bytes per step", f"{_bytes(s.feature_bytes_per_step)}  ({_bytes(s.feature_bytes)} fetched for "
                                       f"{plural(s.feature_gathers, 'subgraph')})")]


def _loss_spike(s: RunSummary) -> str:
    """The loss-spike line: the ratio, what it is made of, or why there is none."""
    spike = s.loss_spike
    if spike.steps == 0:
        return "n/a (no step after the warm-up: epoch 1 and the first 5 % of steps)"
    if spike.non_finite:
        return f"inf ({spike.non_finite:,} step loss(es) after the warm-up not finite: training diverged)"
    return (f"{spike.ratio:.1f}  (largest step loss {spike.largest:.4g} / median {spike.median:.4g}, "
            f"{plural(spike.steps, 'step')} after the warm-up)")


def _best_epoch(s: RunSummary) -> str:
    return "" if math.isnan(s.best_val_epoch) or math.isnan(s.val_score) else f"  (epoch {s.best_val_epoch:g})"


def _evaluation(s: RunSummary) -> str:
    """How the final full-graph scoring went, and what it was expected to take."""
    what = {"not run": "not run (the run ended before it; the scores are the best validation's, if any)",
            "cut at the deadline": "cut at the run's deadline (max_seconds): not scored"}.get(s.evaluation,
                                                                                              s.evaluation)
    if not math.isnan(s.final_evaluation_s):
        what += f" in {s.final_evaluation_s:.1f} s"
    if not math.isnan(s.evaluation_estimate_s):
        what += f"  (one full-graph evaluation estimated at {s.evaluation_estimate_s:.2g} s)"
    return what


def _seconds(value: float, of: float | None = None) -> str:
    share = f"  ({100 * value / of:4.1f}%)" if of else ""
    return f"{value:9.1f} s{share}"


def format_summary(s: RunSummary) -> str:
    """The end-of-run table: results, work done, and the time breakdown."""
    t = s.times
    trainer_time = t.compute + t.data_wait + t.evaluation
    rows: list[tuple[str, str]] = [
        ("dataset", s.dataset),
        (f"test {s.metric}", _score(s.test_score)),
        (f"best validation {s.metric}", _score(s.val_score) + _best_epoch(s)),
        *([("final evaluation", _evaluation(s))] if s.evaluation else []),
        ("stopped by", s.stopped_by),
        *([("time budget", s.time_budget)] if s.time_budget else []),
        *([("normalization", s.normalization)] if s.normalization else []),
        ("epochs", f"{s.epochs}"),
        ("optimizer steps", f"{s.steps:,}"),
        ("loss spike ratio", _loss_spike(s)),
        ("subgraphs trained on", f"{s.subgraphs_trained:,}  ({s.training_throughput:.1f}/s)"),
        ("subgraphs sampled", f"{s.subgraphs_sampled:,}"),
        ("sampler throughput", f"{s.sampler_throughput:.1f} subgraphs/s  ({plural(s.sampler_workers, 'worker')})"),
        ("trainers", f"{s.trainers}" + (f"  (on {s.trainer_device})" if s.trainer_device else "")),
    ]
    rows += _features(s)
    if s.pool is not None:
        a = s.pool
        rows.append(("pool account", f"{a.produced:,} produced = {a.trained:,} trained + {a.waiting:,} waiting + "
                                     f"{a.pending:,} pending + {a.dead_lettered:,} dead-lettered"
                                     + _unaccounted(a.unaccounted)))
        rows.append(("  redelivered", f"{a.redelivered:,}"))
        rows += [("  dead letter", line) for line in a.dead_letters]
    rows.append(("restarts", f"{len(s.restarts)}"))
    rows += [("", f"  {line}") for line in s.restarts]
    if s.resumed_from_step > 0:
        rows.append(("resumed from", f"step {s.resumed_from_step:,} (scores, epochs, steps: the whole run; "
                                     "sampling and times: this part)"))
    if s.checkpoint_dir and (not s.run_dir or Path(s.checkpoint_dir).parent != Path(s.run_dir)):
        rows.append(("checkpoints", s.checkpoint_dir))  # outside the run directory ([trainer] checkpoint_dir)
    rows += [
        ("", ""),
        ("where the time went", ""),
        ("  sampling (sampler workers)", _seconds(t.sampling)),
        ("  samplers waiting on a full pool", _seconds(t.sampler_pool_wait)),
        ("  feature fetch (trainers)", _seconds(t.feature_fetch)),
        ("  compute (trainers)", _seconds(t.compute, trainer_time)),
        ("  waiting for data (trainers)", _seconds(t.data_wait, trainer_time)),
        ("  evaluation (trainers)", _seconds(t.evaluation, trainer_time)),
        ("  start-up", _seconds(t.startup) + (f"  ({_startup(s.startup)})" if s.startup else "")),
        ("  wall clock", _seconds(t.wall)),
    ]
    if s.run_dir:  # last: where the model, its metrics and this summary are
        rows += [("", ""), ("run directory", s.run_dir)]
    width = max(len(k) for k, _ in rows)
    lines = ["== saintpipe run: summary =="]
    lines += [f"{k.ljust(width)}  {v}".rstrip() for k, v in rows]
    return "\n".join(lines)
