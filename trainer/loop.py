"""The training loop: feed → batch → step → acknowledge, epochs, validation, early stopping, checkpoints.

An epoch closes each time the labelled nodes trained on, summed over all data-parallel trainers, add up to
|V_train|, so every trainer agrees on where epochs end (docs/explanation/algorithms.md).

After every ``eval_every`` epochs (and every ``eval_every_steps`` steps) the loop scores the validation split,
keeps the best weights, checkpoints, and stops after ``patience`` validations without improvement. The final
test score is that of the best weights: each validation scores the test split from the same full-graph pass
(selection still looks at validation only), so the end of training needs no pass of its own unless nothing was
validated yet.

Evaluation is followed and bounded through the loop's :class:`~saintpipe.trainer.eval_watch.EvalWatch`
(``loop.watch``): another thread sees which pass it is in, cancels a validation, or sets a deadline past which
the final scoring is cut (NaN scores; ``TrainResult.evaluation`` says so). :meth:`TrainLoop.snapshot` is the
result so far, for a run that is interrupted before the loop returns.

Every step's loss and the epoch it belonged to, and every validation's (epoch, score), are recorded and travel
back in the :class:`TrainResult` (and in checkpoints, so a resumed run still has them all): the run summary
reads its loss-spike ratio and validation history from them.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from saintpipe.trainer.batch import batch_from_subgraph
from saintpipe.trainer.run_dir.checkpoint import Checkpointer
from saintpipe.trainer.config import TrainerConfig
from saintpipe.trainer.eval_watch import EvaluationCancelled, EvalWatch
from saintpipe.trainer.evaluate import EvalGraph, evaluate, layerwise_limits
from saintpipe.minibatch.feed import Feed
from saintpipe.trainer.losses import StepLosses
from saintpipe.trainer.metrics import FeatureMeter, FeatureTotals, TrainerMetrics
from saintpipe.trainer.run_dir.outputs import RunOutputs
from saintpipe.trainer.result import TrainResult
from saintpipe.trainer.step import EarlyStopping, GradSync, TrainState
from saintpipe.trainer.timing import TimeBreakdown

log = logging.getLogger(__name__)


@dataclass
class LoopProgress:
    """Where the loop stands; saved in checkpoints with the model."""

    epoch: int = 0
    epoch_fraction: float = 0.0
    subgraphs: int = 0
    stopped: bool = False  # early stopping fired: a restarted trainer does not go on
    stopped_early: bool = False
    elapsed_s: float = 0.0  # training seconds over the whole run, resumed parts included (metrics.jsonl)


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
        sampled_degrees: int [N] degrees in the graph the samplers draw from, when it is not the full graph
            (the training graph's: :func:`saintpipe.services.dataset.sample_graph.sampled_degrees`).
        outputs: the run directory's metrics history and best/final models (:mod:`saintpipe.trainer.run_dir.outputs`),
            written by the leader; None: not kept.
        on_validation: called on the leader after each validation with (epoch, validation score, step), once
            the validation is recorded and checkpointed (a sweep's trial reports it to Ray Tune).
        on_first_step: called once, in the loop's thread, right after the first step (a run's trainer estimates a
            full-graph evaluation there: sooner would delay the first step; beside the steps, share their core).
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
        sampled_degrees: np.ndarray | None = None,
        outputs: RunOutputs | None = None,
        on_validation: Callable[[float, float, int], None] | None = None,
        on_first_step: Callable[[], None] | None = None,
    ) -> None:
        self.state, self.graph, self.config, self.name = state, graph, config, name
        self.metrics, self.sync, self.decide, self.is_leader = metrics, sync, decide, is_leader
        self.checkpointer, self.on_validation = checkpointer, on_validation
        self.feature_meter = feature_meter
        self.train_mask = graph.train_mask()
        self.num_train = int(self.train_mask.sum())
        self.labels = np.asarray(graph.labels)
        # Training batches' self-loops use the degrees of the graph the subgraphs were drawn from.
        self.degrees = graph.degrees if sampled_degrees is None else sampled_degrees
        self.stopper = EarlyStopping(config.patience, config.min_delta)
        self.best_test = float("nan")  # the test score of the stopper's best weights, from their validation pass
        self.watch = EvalWatch()
        self._estimate_s = float("nan")
        self.progress = LoopProgress()
        self.times = TimeBreakdown()
        self.resumed_from = -1
        self.redelivered = 0
        self.step_losses = StepLosses()
        self.val_history: list[tuple[float, float]] = []  # (epoch, score), in step with self.stopper.history
        if checkpointer is not None:
            saved = checkpointer.load(map_location=state.device)
            if saved is not None:
                self._restore(saved)
        self.outputs = outputs if is_leader else None
        self._recorded_steps = 0  # steps whose losses a metrics line has averaged
        self._started = time.perf_counter()  # reset by run(); elapsed_s goes on from the checkpoint's
        # When this process's first subgraph arrived and its first step was done (time.time(); a run's timeline).
        self.first_subgraph_at = self.first_step_at = math.nan
        self.on_first_step = on_first_step
        self._elapsed_before = self.progress.elapsed_s
        if self.outputs is not None:  # lines written past the checkpoint are trained again: they go
            self._recorded_steps = self.outputs.resumed_at(self.state.steps)

    # -- checkpoints ---------------------------------------------------------------------------------------

    def _restore(self, saved: dict) -> None:
        self.state.load_state_dict(saved["train_state"])
        self.stopper.load_state_dict(saved["early_stopping"])
        self.progress = LoopProgress(**saved["progress"])
        self.resumed_from = self.state.steps
        if "records" in saved:  # checkpoints written before the records existed resume without them
            losses = saved["records"]["step_losses"]
            self.step_losses.load_state_dict({k: v.cpu().numpy() for k, v in losses.items()})
            self.val_history = [(float(e), float(v)) for e, v in saved["records"]["val_history"]]
            self.best_test = float(saved["records"].get("best_test", float("nan")))
        else:  # their validations' epochs are unknown; the list stays in step with the stopper's history
            self.val_history = [(float("nan"), float(v)) for _, v in self.stopper.history]
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
        self.progress.elapsed_s = self._elapsed()
        self.checkpointer.save(
            {
                "train_state": self.state.state_dict(),
                "early_stopping": self.stopper.state_dict(),
                "progress": asdict(self.progress),
                # tensors: compact, and what a weights_only load accepts
                "records": {"step_losses": {k: torch.from_numpy(v) for k, v in self.step_losses.state_dict().items()},
                            "val_history": [list(h) for h in self.val_history], "best_test": self.best_test},
                "config": self.config.model_dump(mode="json"),
            },
            step=self.state.steps,
        )

    # -- the loop ------------------------------------------------------------------------------------------

    def _done(self) -> bool:
        cfg = self.config
        return bool(
            self.progress.stopped
            or self.progress.epoch >= cfg.epochs
            or (cfg.max_steps and self.state.steps >= cfg.max_steps)
        )

    def run(self, feed: Feed) -> TrainResult:
        """Train until the epoch budget, ``max_steps`` or early stopping; returns the summary."""
        start = self._started = time.perf_counter()
        last_loss = float("nan")
        first = True
        while not self._done():
            waited = time.perf_counter()
            item = feed.next(self.config.pool_timeout_s)
            data_wait = time.perf_counter() - waited
            if first:
                self.first_subgraph_at = time.time()
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
                self.first_step_at = time.time()
                log.info("%s: first step done (step %d), %.1f s after the loop started", self.name,
                         self.state.steps, time.perf_counter() - start)
                if self.on_first_step is not None:
                    self.on_first_step()
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
        self.step_losses.append(loss, self.progress.epoch)  # before _advance: the epoch this step belongs to
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
        if evaluate_now:  # an epoch-end validation is that epoch's, not a sliver past it
            self._validate(float(p.epoch) if epoch_ended else round(p.epoch + p.epoch_fraction, 4))  # checkpoints
        elif epoch_ended or (cfg.checkpoint_every_steps and self.state.steps % cfg.checkpoint_every_steps == 0):
            if epoch_ended:
                self._record("epoch", float(p.epoch))
            self._checkpoint()

    def _validate(self, epoch: float) -> None:
        # [stop, validation score, skipped]: rank 0 decides, every rank follows (ranks stay in lockstep)
        decision = self._leader_validation(epoch) if self.is_leader else [0.0, 0.0, 0.0]
        if self.decide is not None:
            decision = self.decide(decision)
        if decision[2]:  # cut on rank 0: no validation to record on any rank
            self._checkpoint()
            return
        self.val_history.append((epoch, decision[1]))  # rank 0's score, broadcast: the same on every rank
        if self.metrics is not None:
            self.metrics.val_score(decision[1])
        if decision[0]:
            self.progress.stopped = self.progress.stopped_early = True
        self._checkpoint()
        if self.on_validation is not None and self.is_leader:
            self.on_validation(epoch, decision[1], self.state.steps)

    def _leader_validation(self, epoch: float) -> list[float]:
        """Score the validation and test splits in one pass, update early stopping, keep a new best."""
        t0 = time.perf_counter()
        try:
            scores = self._scores(("val", "test"))
        except EvaluationCancelled as exc:  # the run's end is near: its final scoring goes first
            self.times.evaluation += time.perf_counter() - t0
            log.info("%s: validation at step %d skipped: %s", self.name, self.state.steps, exc)
            return [0.0, float("nan"), 1.0]
        val = scores["val"]
        best_before = self.stopper.best_state
        stop = self.stopper.update(val, self.state.steps, self.state.model)
        self.times.evaluation += time.perf_counter() - t0
        self._record("validation", epoch, val_score=val)
        if self.stopper.best_state is not best_before:  # a new best: keep it now, with its test score
            self.best_test = scores["test"]
            if self.outputs is not None:
                self.outputs.save_best(self.state.model, step=self.state.steps, epoch=epoch, val_score=val,
                                       test_score=scores["test"])
        log.info("%s: epoch %d step %d val %.4f (best %.4f at step %d)", self.name, self.progress.epoch,
                 self.state.steps, val, self.stopper.best, self.stopper.best_step)
        return [float(stop), val, 0.0]

    def _scores(self, splits: tuple[str, ...]) -> dict[str, float]:
        cfg = self.config
        return evaluate(
            self.state.model,
            self.graph,
            splits,
            max_full_bytes=cfg.eval_full_graph_max_bytes,
            batch_nodes=cfg.eval_batch_nodes,
            device=self.state.device,
            watch=self.watch,
        )

    @property
    def needs_final_evaluation(self) -> bool:
        """Whether ending now takes a full-graph pass: not when the best weights' validation pass scored the
        test split too (it did unless nothing was validated yet, or a checkpoint from before that resumed)."""
        return self.stopper.best_state is None or bool(np.isnan(self.best_test))

    def evaluation_estimate(self) -> float:
        """Seconds one full-graph evaluation takes here: the last one measured, else an estimate from timing a
        few row blocks of each layer (:meth:`LayerwiseInference.estimate_seconds`), made once. The result's
        ``evaluation_estimate_seconds`` is the last figure given."""
        from saintpipe.trainer.inference import LayerwiseInference

        if not np.isnan(self.watch.last_seconds):
            self._estimate_s = self.watch.last_seconds
        elif np.isnan(self._estimate_s):
            cfg = self.config
            t0 = time.perf_counter()
            limits = layerwise_limits(cfg.eval_batch_nodes, cfg.eval_full_graph_max_bytes)
            self._estimate_s = LayerwiseInference(self.state.model, self.graph, limits,
                                                  device=self.state.device).estimate_seconds()
            log.info("%s: one full-graph evaluation estimated at %.1f s (estimate took %.1f s)", self.name,
                     self._estimate_s, time.perf_counter() - t0)
        return self._estimate_s

    def _finish(self, last_loss: float) -> TrainResult:
        val = test = final_s = float("nan")
        evaluation = "complete"
        if self.is_leader:
            t0 = time.perf_counter()
            try:
                val, test = self._final_scores()
            except EvaluationCancelled as exc:
                evaluation = "cut at the deadline"
                log.warning("%s: final evaluation not finished: %s", self.name, exc)
            final_s = time.perf_counter() - t0
            self.times.evaluation += final_s
            if self.outputs is not None:
                epoch = round(self.progress.epoch + self.progress.epoch_fraction, 4)
                self.outputs.save_final(self.state.model, step=self.state.steps, epoch=epoch)
                self._record("end", epoch, val_score=val, test_score=test, best_epoch=self._best_val_epoch(),
                             best_step=self.stopper.best_step)
        self._checkpoint()
        return self._result(val, test, last_loss, evaluation, final_s=final_s)

    def _final_scores(self) -> tuple[float, float]:
        """Validation and test scores of the best weights: from their validation pass when it scored the test
        split too, else from one more pass (never validated yet, or resumed from an older checkpoint)."""
        if self.stopper.best_state is None:  # never validated (tiny budgets): score the weights we have
            scores = self._scores(("val", "test"))
            self.stopper.update(scores["val"], self.state.steps, self.state.model)
            self.val_history.append((round(self.progress.epoch + self.progress.epoch_fraction, 4), scores["val"]))
            self.best_test = scores["test"]
            if self.outputs is not None:
                self.outputs.save_best(self.state.model, step=self.state.steps, epoch=self._best_val_epoch(),
                                       val_score=scores["val"], test_score=scores["test"])
            return scores["val"], scores["test"]
        if not np.isnan(self.best_test):
            return self.stopper.best, self.best_test
        current = {k: v.detach().clone() for k, v in self.state.model.state_dict().items()}
        self.state.model.load_state_dict(self.stopper.best_state)
        try:
            scores = self._scores(("val", "test"))
            if self.outputs is not None:  # the best weights again, now with their test score
                self.outputs.save_best(self.state.model, step=self.stopper.best_step, epoch=self._best_val_epoch(),
                                       val_score=scores["val"], test_score=scores["test"])
        finally:
            self.state.model.load_state_dict(current)
        self.best_test = scores["test"]
        return scores["val"], scores["test"]

    def snapshot(self) -> TrainResult:
        """The result so far, without scoring: for a run interrupted before :meth:`run` returned (the scores
        are the best validation's, when there was one; the time breakdown covers what was done)."""
        val = self.stopper.best if self.stopper.best_state is not None else float("nan")
        times = TimeBreakdown(**asdict(self.times))
        times.wall += time.perf_counter() - self._started
        return self._result(val, self.best_test, float("nan"), "not run", times=times)

    def _result(self, val: float, test: float, last_loss: float, evaluation: str,
                times: TimeBreakdown | None = None, final_s: float = float("nan")) -> TrainResult:
        features = self.feature_meter.totals() if self.feature_meter is not None else FeatureTotals()
        losses = self.step_losses
        n = min(len(losses.losses), len(losses.epochs))  # another thread may be appending
        return TrainResult(
            evaluation=evaluation,
            evaluation_estimate_seconds=self._estimate_s,
            final_evaluation_seconds=final_s,
            test_score=test,
            val_score=val,
            epochs=self.progress.epoch,
            steps=self.state.steps,
            subgraphs=self.progress.subgraphs,
            stopped_early=self.progress.stopped_early,
            resumed_from_step=self.resumed_from,
            times=times or self.times,
            history=list(self.stopper.history),
            redelivered=self.redelivered,
            last_loss=last_loss,
            model_digest=model_digest(self.state.model),
            feature_gathers=features.gathers,
            feature_rows=features.rows,
            feature_cache_hits=features.cache_hits,
            feature_bytes=features.fetched_bytes,
            device=str(self.state.device),
            step_losses=losses.losses[:n].tolist(),
            step_epochs=losses.epochs[:n].tolist(),
            val_history=list(self.val_history),
            best_val_epoch=self._best_val_epoch(),
        )

    def _elapsed(self) -> float:
        return self._elapsed_before + time.perf_counter() - self._started

    def _record(self, event: str, epoch: float, **row: object) -> None:
        """A line of metrics.jsonl (leader, with a run directory): the mean loss of the steps since the last."""
        if self.outputs is None:
            return
        losses = self.step_losses.losses[self._recorded_steps:]
        self._recorded_steps = len(self.step_losses)
        self.outputs.record(event, epoch=epoch, step=self.state.steps,
                            train_loss=float(losses.mean()) if losses.size else None,
                            val_score=row.pop("val_score", None), best_val_score=self.stopper.best, **row,
                            elapsed_s=round(self._elapsed(), 3))

    def _best_val_epoch(self) -> float:
        """The epoch of the validation whose weights were kept (the stopper's best step), NaN if none."""
        # val_history and the stopper's history are appended together (and checkpointed together).
        for (step, _), (epoch, _) in zip(self.stopper.history, self.val_history, strict=False):
            if step == self.stopper.best_step:
                return epoch
        return float("nan")


def model_digest(model: torch.nn.Module) -> str:
    """sha256 over the model's tensors, in state-dict order."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
