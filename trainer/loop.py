"""The training loop: feed → batch → step → acknowledge, epochs, validation, early stopping, checkpoints.

An epoch is |V_train| / (mean labelled nodes per subgraph) subgraphs — the
paper's |V| / |V_s| when subgraphs are drawn from the training graph, and the
same idea when they are drawn from the whole graph and only some of their nodes
carry training labels. The loop counts labelled nodes as they go by (summed
over all data-parallel trainers) and closes an epoch each time they add up to
|V_train|, so every trainer agrees on where epochs end.

After every ``eval_every`` epochs (and every ``eval_every_steps`` steps) the
loop scores the validation split, keeps the best weights, checkpoints, and
stops after ``patience`` validations without improvement. The final test score
is that of the best weights.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from saintpipe.trainer.batch import batch_from_subgraph
from saintpipe.trainer.checkpoint import Checkpointer
from saintpipe.trainer.config import TrainerConfig
from saintpipe.trainer.evaluate import EvalGraph, evaluate
from saintpipe.trainer.feeds import Feed
from saintpipe.trainer.metrics import FeatureMeter, FeatureTotals, TrainerMetrics
from saintpipe.trainer.step import EarlyStopping, GradSync, TrainState
from saintpipe.trainer.timing import TimeBreakdown

log = logging.getLogger(__name__)


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

    @property
    def features(self) -> FeatureTotals:
        """The feature figures as :class:`~saintpipe.trainer.metrics.FeatureTotals` (hit rate, bytes per step)."""
        return FeatureTotals(self.feature_gathers, self.feature_rows, self.feature_cache_hits, self.feature_bytes)

    def summary(self) -> dict:
        """A flat dict for printing or JSON."""
        out = {k: v for k, v in asdict(self).items() if k not in ("times", "history", "model_digest")}
        for name in TimeBreakdown.TRAINER_FIELDS:  # the wall clock keeps its published key, total_s
            out[f"{'total' if name == 'wall' else name}_s"] = round(getattr(self.times, name), 4)
        out["feature_cache_hit_rate"] = self.features.hit_rate
        out["feature_bytes_per_step"] = self.features.bytes_per_gather
        return out


@dataclass
class LoopProgress:
    """Where the loop stands; saved in checkpoints with the model."""

    epoch: int = 0
    epoch_fraction: float = 0.0
    subgraphs: int = 0
    stopped: bool = False  # early stopping fired: a restarted trainer does not go on
    stopped_early: bool = False


class TrainLoop:
    """Runs training on one trainer (rank) of a possibly data-parallel group.

    Args:
        state: model and optimizer.
        graph: the full graph (labels, splits; features for evaluation).
        config: the loop's settings.
        name: this trainer's name (metric label, log prefix).
        metrics: Prometheus metrics, or None.
        sync: the data-parallel gradient all-reduce, or None.
        decide: broadcasts rank 0's evaluation decision to every rank (None: single trainer).
        is_leader: this rank evaluates, checkpoints and logs (rank 0).
        checkpointer: where checkpoints go, or None.
        feature_meter: counts the training steps' feature gathers (the feed gathers through it); its totals
            go into the result.
    """

    def __init__(
        self,
        state: TrainState,
        graph: EvalGraph,
        config: TrainerConfig,
        *,
        name: str = "trainer-0",
        metrics: TrainerMetrics | None = None,
        sync: GradSync | None = None,
        decide: Callable[[list[float]], list[float]] | None = None,
        is_leader: bool = True,
        checkpointer: Checkpointer | None = None,
        feature_meter: FeatureMeter | None = None,
    ) -> None:
        self.state, self.graph, self.config, self.name = state, graph, config, name
        self.metrics, self.sync, self.decide, self.is_leader = metrics, sync, decide, is_leader
        self.checkpointer = checkpointer
        self.feature_meter = feature_meter
        self.train_mask = graph.train_mask()
        self.num_train = int(self.train_mask.sum())
        self.labels = np.asarray(graph.labels)
        self.degrees = graph.degrees
        self.stopper = EarlyStopping(config.patience, config.min_delta)
        self.progress = LoopProgress()
        self.times = TimeBreakdown()
        self.resumed_from = -1
        self.redelivered = 0
        if checkpointer is not None:
            saved = checkpointer.load(map_location=state.device)
            if saved is not None:
                self._restore(saved)

    # -- checkpoints ---------------------------------------------------------------------------------------

    def _restore(self, saved: dict) -> None:
        self.state.load_state_dict(saved["train_state"])
        self.stopper.load_state_dict(saved["early_stopping"])
        self.progress = LoopProgress(**saved["progress"])
        self.resumed_from = self.state.steps
        log.info(
            "%s: resumed from step %d (epoch %d, best val %.4f)",
            self.name,
            self.state.steps,
            self.progress.epoch,
            self.stopper.best,
        )

    def _checkpoint(self) -> None:
        if self.checkpointer is None or not self.is_leader:
            return
        self.checkpointer.save(
            {
                "train_state": self.state.state_dict(),
                "early_stopping": self.stopper.state_dict(),
                "progress": asdict(self.progress),
                "config": self.config.model_dump(mode="json"),
            },
            step=self.state.steps,
        )

    # -- the loop ------------------------------------------------------------------------------------------

    def _done(self) -> bool:
        cfg = self.config
        return (
            self.progress.stopped
            or self.progress.epoch >= cfg.epochs
            or (cfg.max_steps and self.state.steps >= cfg.max_steps)
        )

    def run(self, feed: Feed) -> TrainResult:
        """Train until the epoch budget, ``max_steps`` or early stopping; returns the summary."""
        start = time.perf_counter()
        last_loss = float("nan")
        first = True
        while not self._done():
            waited = time.perf_counter()
            item = feed.next(self.config.pool_timeout_s)
            data_wait = time.perf_counter() - waited
            compute_start = time.perf_counter()
            batch = batch_from_subgraph(
                item.subgraph,
                item.features,
                self.labels,
                self.train_mask,
                self.degrees,
                device=self.state.device,
            )
            labelled = float(batch.num_labelled)
            last_loss, labelled_all = self.state.step(batch, self.sync, labelled)
            if self.state.device.type == "cuda":
                torch.cuda.synchronize(self.state.device)
            compute = time.perf_counter() - compute_start
            item.ack()
            if first:
                first = False
                log.info("%s: first step done (step %d), %.1f s after the loop started", self.name,
                         self.state.steps, time.perf_counter() - start)
            self._account(item, data_wait, compute, last_loss)
            self._advance(labelled_all if self.sync is not None else labelled)
        self.times.wall += time.perf_counter() - start
        return self._finish(last_loss)

    def _account(self, item, data_wait: float, compute: float, loss: float) -> None:
        t = self.times
        t.sampling_wait += item.sample_wait_s
        t.feature_fetch += item.fetch_s
        t.data_wait += data_wait
        t.compute += compute
        self.progress.subgraphs += 1
        self.redelivered += int(item.deliveries > 1)
        if self.metrics is not None:
            self.metrics.observe_step(compute, data_wait, item.fetch_s, loss)

    def _advance(self, labelled: float) -> None:
        cfg, p = self.config, self.progress
        p.epoch_fraction += labelled / max(1, self.num_train)
        evaluate_now = bool(cfg.eval_every_steps and self.state.steps % cfg.eval_every_steps == 0)
        epoch_ended = False
        while p.epoch_fraction >= 1.0:
            p.epoch_fraction -= 1.0
            p.epoch += 1
            epoch_ended = True
            evaluate_now |= p.epoch % cfg.eval_every == 0 or p.epoch >= cfg.epochs
        if evaluate_now:
            self._validate()  # checkpoints too
        elif epoch_ended or (cfg.checkpoint_every_steps and self.state.steps % cfg.checkpoint_every_steps == 0):
            self._checkpoint()

    def _validate(self) -> None:
        decision = [0.0, 0.0]
        if self.is_leader:
            t0 = time.perf_counter()
            val = self._scores(("val",))["val"]
            stop = self.stopper.update(val, self.state.steps, self.state.model)
            self.times.evaluation += time.perf_counter() - t0
            decision = [float(stop), val]
            log.info(
                "%s: epoch %d step %d val %.4f (best %.4f at step %d)",
                self.name,
                self.progress.epoch,
                self.state.steps,
                val,
                self.stopper.best,
                self.stopper.best_step,
            )
        if self.decide is not None:
            decision = self.decide(decision)
        if self.metrics is not None:
            self.metrics.val_score(decision[1])
        if decision[0]:
            self.progress.stopped = self.progress.stopped_early = True
        self._checkpoint()

    def _scores(self, splits: tuple[str, ...]) -> dict[str, float]:
        cfg = self.config
        return evaluate(
            self.state.model,
            self.graph,
            splits,
            max_full_bytes=cfg.eval_full_graph_max_bytes,
            batch_nodes=cfg.eval_batch_nodes,
            device=self.state.device,
        )

    def _finish(self, last_loss: float) -> TrainResult:
        val = test = float("nan")
        if self.is_leader:
            t0 = time.perf_counter()
            if self.stopper.best_state is None:  # never validated (tiny budgets): score the weights we have
                self.stopper.update(self._scores(("val",))["val"], self.state.steps, self.state.model)
            current = {k: v.detach().clone() for k, v in self.state.model.state_dict().items()}
            self.state.model.load_state_dict(self.stopper.best_state)
            scores = self._scores(("val", "test"))
            self.state.model.load_state_dict(current)
            val, test = scores["val"], scores["test"]
            self.times.evaluation += time.perf_counter() - t0
        self._checkpoint()
        features = self.feature_meter.totals() if self.feature_meter is not None else FeatureTotals()
        return TrainResult(
            test_score=test,
            val_score=val,
            epochs=self.progress.epoch,
            steps=self.state.steps,
            subgraphs=self.progress.subgraphs,
            stopped_early=self.progress.stopped_early,
            resumed_from_step=self.resumed_from,
            times=self.times,
            history=list(self.stopper.history),
            redelivered=self.redelivered,
            last_loss=last_loss,
            model_digest=model_digest(self.state.model),
            feature_gathers=features.gathers,
            feature_rows=features.rows,
            feature_cache_hits=features.cache_hits,
            feature_bytes=features.fetched_bytes,
        )


def model_digest(model: torch.nn.Module) -> str:
    """sha256 over the model's tensors, in state-dict order."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
