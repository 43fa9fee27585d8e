"""What a local run reports at its end: scores, amounts of work, and where the time went."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from saintpipe.trainer.timing import TimeBreakdown


@dataclass
class RunSummary:
    """The figures ``saintpipe run`` prints when it ends (also as JSON with ``as_dict``).

    Attributes:
        dataset: the dataset's name and size. test_score/val_score: accuracy (F1-micro for multi-label data)
        of the best-validation weights; NaN when the run ended before scoring. stopped_by: why training
        ended (finished, early stopping, max_seconds, SIGINT, ...). times: the trainers' time breakdown with
        the sampler workers' figures, the start-up and the whole command's wall clock.
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

    @property
    def sampler_throughput(self) -> float:
        """Subgraphs per second the samplers produced while training ran."""
        return self.subgraphs_sampled / self.training_seconds if self.training_seconds > 0 else math.nan

    @property
    def training_throughput(self) -> float:
        """Subgraphs per second the trainers trained on."""
        return self.subgraphs_trained / self.training_seconds if self.training_seconds > 0 else math.nan

    def as_dict(self) -> dict:
        out = asdict(self)
        out["sampler_throughput"] = self.sampler_throughput
        out["training_throughput"] = self.training_throughput
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), default=float)


def _score(value: float) -> str:
    return "n/a (not scored)" if math.isnan(value) else f"{value:.4f}"


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
        (f"best validation {s.metric}", _score(s.val_score)),
        ("stopped by", s.stopped_by),
        ("epochs", f"{s.epochs}"),
        ("optimizer steps", f"{s.steps:,}"),
        ("subgraphs trained on", f"{s.subgraphs_trained:,}  ({s.training_throughput:.1f}/s)"),
        ("subgraphs sampled", f"{s.subgraphs_sampled:,}"),
        ("sampler throughput", f"{s.sampler_throughput:.1f} subgraphs/s  ({s.sampler_workers} workers)"),
        ("trainers", f"{s.trainers}"),
        ("", ""),
        ("where the time went", ""),
        ("  sampling (sampler workers)", _seconds(t.sampling)),
        ("  samplers waiting on a full pool", _seconds(t.sampler_pool_wait)),
        ("  feature fetch (trainers)", _seconds(t.feature_fetch)),
        ("  compute (trainers)", _seconds(t.compute, trainer_time)),
        ("  waiting for data (trainers)", _seconds(t.data_wait, trainer_time)),
        ("  evaluation (trainers)", _seconds(t.evaluation, trainer_time)),
        ("  start-up", _seconds(t.startup)),
        ("  wall clock", _seconds(t.wall)),
    ]
    width = max(len(k) for k, _ in rows)
    lines = ["== saintpipe run: summary =="]
    lines += [f"{k.ljust(width)}  {v}".rstrip() for k, v in rows]
    return "\n".join(lines)
