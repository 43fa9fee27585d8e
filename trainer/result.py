"""What a trainer reports when its loop ends: :class:`TrainResult`.

Kept apart from the loop, which imports torch: the process that started the trainers (``saintpipe run``'s
driver, through :class:`~saintpipe.trainer.actor.TrainerGroup`) unpickles their results and snapshots without
loading torch (about 2 s of CPU it would take from the trainer and the sampler workers as training starts).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from saintpipe.trainer.losses import loss_spike_ratio
from saintpipe.trainer.metrics import FeatureTotals
from saintpipe.trainer.timing import TimeBreakdown


@dataclass
class TrainResult:
    """What a training run reports.

    Attributes:
        test_score, val_score: accuracy (or F1-micro) of the best-validation weights.
        epochs: epochs completed. steps: optimizer steps. subgraphs: subgraphs trained on by this trainer.
        stopped_early: patience ran out. resumed_from_step: step of the checkpoint resumed (-1: fresh start).
        times: the time breakdown. history: (step, validation score) of every validation.
        redelivered: subgraphs that came back from the pool a second time (another trainer died holding them).
        last_loss: the last step's training loss.
        model_digest: sha256 of the final weights (equal on every data-parallel trainer).
        feature_gathers, feature_rows, feature_cache_hits, feature_bytes: what the training steps' feature
            gathers cost (:class:`~saintpipe.trainer.metrics.FeatureTotals`; zero without a feature meter).
        step_losses: every optimizer step's training loss, in order (this trainer's: with data-parallel
            trainers, each rank's loss on its own subgraph). step_epochs: the 0-based epoch each step belonged to.
        val_history: (epoch, validation score) of every validation, in order; the epoch is fractional for a
            validation in mid-epoch (``eval_every_steps``). best_val_epoch: the epoch of the validation whose
            weights were kept (NaN: never validated). device: the torch device it trained on.
        evaluation: how the final scoring went: "complete", "cut at the deadline" (its scores NaN), or "not
            run" (a snapshot of a loop that had not finished). final_evaluation_seconds: its time (0 when the best
            validation's pass had scored the test split already). evaluation_estimate_seconds: what the loop last
            expected one full-graph evaluation to take (NaN: never asked).
    """

    test_score: float
    val_score: float
    epochs: int
    steps: int
    subgraphs: int
    stopped_early: bool
    resumed_from_step: int
    times: TimeBreakdown
    history: list[tuple[int, float]] = field(default_factory=list)
    redelivered: int = 0
    last_loss: float = float("nan")
    model_digest: str = ""
    feature_gathers: int = 0
    feature_rows: int = 0
    feature_cache_hits: int = 0
    feature_bytes: int = 0
    step_losses: list[float] = field(default_factory=list)
    step_epochs: list[int] = field(default_factory=list)
    val_history: list[tuple[float, float]] = field(default_factory=list)
    best_val_epoch: float = float("nan")
    device: str = ""
    evaluation: str = "complete"
    evaluation_estimate_seconds: float = float("nan")
    final_evaluation_seconds: float = float("nan")

    @property
    def loss_spike_ratio(self) -> float:
        """Largest step loss / median step loss after the first epoch (:mod:`saintpipe.trainer.losses`)."""
        return loss_spike_ratio(self.step_losses, self.step_epochs)

    @property
    def features(self) -> FeatureTotals:
        """The feature figures as :class:`~saintpipe.trainer.metrics.FeatureTotals` (hit rate, bytes per step)."""
        return FeatureTotals(self.feature_gathers, self.feature_rows, self.feature_cache_hits, self.feature_bytes)

    def summary(self) -> dict:
        """A flat dict for printing or JSON (the per-step and per-validation lists left out)."""
        lists = ("times", "history", "model_digest", "step_losses", "step_epochs", "val_history")
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in lists}
        out["loss_spike_ratio"] = self.loss_spike_ratio
        for name in TimeBreakdown.TRAINER_FIELDS:  # the wall clock keeps its published key, total_s
            out[f"{'total' if name == 'wall' else name}_s"] = round(getattr(self.times, name), 4)
        out["feature_cache_hit_rate"] = self.features.hit_rate
        out["feature_bytes_per_step"] = self.features.bytes_per_gather
        return out
