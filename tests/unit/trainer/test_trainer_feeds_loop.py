"""Pure logic of the trainer's loop with in-memory fakes: prefetching, epochs, early stopping, resume."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from saintpipe.core.errors import SaintpipeTimeout, ServiceUnavailable
from saintpipe.core.subgraph import Subgraph
from saintpipe.trainer.run_dir.checkpoint import Checkpointer
from saintpipe.trainer.config import ModelConfig, TrainerConfig
from saintpipe.trainer.evaluate import EvalGraph
from saintpipe.minibatch.feed import Item, PoolFeed
from saintpipe.trainer.loop import TrainLoop
from saintpipe.trainer.step import EarlyStopping, TrainState
from saintpipe.trainer.synthetic import random_subgraph


@dataclass
class Entry:
    entry_id: str
    subgraph: Subgraph
    deliveries: int = 1


class FakePool:
    """Hands out numbered entries and records acks and the order of events."""

    job_id = "fake"

    def __init__(self, count: int, events: list, fail_at: int | None = None) -> None:
        self.count, self.events, self.fail_at = count, events, fail_at
        self.next_id = 0
        self.acked: list[str] = []

    def get(self, consumer: str, timeout: float | None = None, *, expand=None):
        if self.next_id == self.fail_at:
            raise ServiceUnavailable("redis went away")
        if self.next_id >= self.count:
            time.sleep(min(timeout or 0.01, 0.01))
            return None
        i = self.next_id
        self.next_id += 1
        self.events.append(("get", i))
        return Entry(str(i), random_subgraph(10, 3.0, seed=i))

    def ack(self, entry_id: str, *, wait: bool = True) -> bool:
        self.events.append(("ack", int(entry_id)))
        self.acked.append(entry_id)
        return True


def test_prefetch_fetches_the_next_subgraph_while_the_current_step_runs():
    events: list = []
    pool = FakePool(3, events)

    def gather(ids):
        events.append(("gather", len(events)))
        return np.zeros((ids.size, 2), np.float32)

    feed = PoolFeed(pool, "t0", gather, prefetch=True, get_timeout=0.05)
    try:
        first = feed.next(timeout=5)
        deadline = time.monotonic() + 5
        while pool.next_id < 2 and time.monotonic() < deadline:  # the "step" on the first item
            time.sleep(0.01)
        assert ("get", 1) in events and ("ack", 0) not in events  # item 1 arrived before item 0 was done
        first.ack()
        second = feed.next(timeout=5)
        assert second.subgraph.equals(random_subgraph(10, 3.0, seed=1))
        assert second.sample_wait_s >= 0 and second.fetch_s >= 0
    finally:
        feed.close()
    assert pool.acked == ["0"]


def test_without_prefetch_nothing_is_taken_ahead_and_timeouts_are_clear():
    events: list = []
    pool = FakePool(1, events)
    feed = PoolFeed(
        pool, "t0", lambda ids: np.zeros((ids.size, 2), np.float32), prefetch=False, get_timeout=0.05
    )
    item = feed.next(timeout=1)
    assert pool.next_id == 1
    item.ack()
    with pytest.raises(SaintpipeTimeout, match="no subgraph from pool job 'fake'"):
        feed.next(timeout=0.2)
    feed.close()


def test_errors_of_the_prefetch_thread_reach_the_training_thread():
    feed = PoolFeed(
        FakePool(5, [], fail_at=1),
        "t0",
        lambda ids: np.zeros((ids.size, 2), np.float32),
        prefetch=True,
        get_timeout=0.05,
    )
    try:
        feed.next(timeout=5)
        with pytest.raises(ServiceUnavailable, match="redis went away"):
            feed.next(timeout=5)
    finally:
        feed.close()
    assert not any(t.name == "prefetch-t0" for t in threading.enumerate())


# --- the loop ---------------------------------------------------------------------------------------------

N, TRAIN = 60, 40


def small_graph() -> EvalGraph:
    sub = random_subgraph(N, 4.0, seed=3, mean_weights=True)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, N)
    splits = {"train": np.arange(TRAIN), "val": np.arange(TRAIN, 50), "test": np.arange(50, N)}
    return EvalGraph.from_arrays(
        sub.indptr, sub.indices, rng.normal(size=(N, 5)).astype(np.float32), labels, splits
    )


class ListFeed:
    """Subgraphs that each hold exactly 10 training nodes (ids 0..39 are the training split)."""

    def __init__(self, graph: EvalGraph) -> None:
        self.graph, self.i, self.acked = graph, 0, 0

    def next(self, timeout: float) -> Item:
        start = (self.i % 4) * 10
        ids = np.concatenate([np.arange(start, start + 10), np.arange(TRAIN, N)])
        sub = random_subgraph(ids.size, 3.0, seed=self.i, mean_weights=True)
        sub = Subgraph(**{**sub.__dict__, "node_ids": ids.astype(np.int64)})
        self.i += 1

        def ack() -> None:
            self.acked += 1

        return Item(sub, self.graph.gather(ids), 0.0, 0.0, ack)

    def close(self) -> None:
        pass


def make_loop(graph, tmp_path=None, **cfg) -> TrainLoop:
    model = ModelConfig(arch="gcn", hidden=[8], dropout=0.0)
    config = TrainerConfig(model=model, **cfg)
    state = TrainState(model, 5, 3, False, seed=0)
    ckpt = Checkpointer(tmp_path) if tmp_path is not None else None
    return TrainLoop(state, graph, config, checkpointer=ckpt)


def test_an_epoch_is_train_nodes_over_labelled_nodes_per_subgraph():
    graph = small_graph()
    feed = ListFeed(graph)
    result = make_loop(graph, epochs=3, patience=0).run(feed)
    # 40 training nodes, 10 labelled per subgraph: 4 subgraphs per epoch.
    assert result.epochs == 3 and result.steps == 12 and feed.acked == 12
    assert [step for step, _ in result.history] == [4, 8, 12]
    assert 0.0 <= result.test_score <= 1.0
    # Every step's loss, with the epoch it belonged to; every validation with its epoch.
    assert len(result.step_losses) == 12 and all(np.isfinite(result.step_losses))
    assert result.step_epochs == [0] * 4 + [1] * 4 + [2] * 4
    assert [epoch for epoch, _ in result.val_history] == [1.0, 2.0, 3.0]
    assert [score for _, score in result.val_history] == [score for _, score in result.history]
    summary = result.summary()
    assert "step_losses" not in summary and summary["loss_spike_ratio"] == result.loss_spike_ratio >= 1.0


def test_early_stopping_after_patience_validations_without_improvement(monkeypatch):
    import saintpipe.trainer.loop as loop_mod

    # (validation, test) of each pass; one pass more would be a final scoring the loop must not need
    scores = iter([(0.5, 0.1), (0.7, 0.8), (0.6, 0.2), (0.65, 0.3), (0.69, 0.4), (0.9, 0.9)])
    splits_asked = []

    def fake_evaluate(model, graph, splits, **kw):
        splits_asked.append(splits)
        val, test = next(scores)
        return {"val": val, "test": test}

    monkeypatch.setattr(loop_mod, "evaluate", fake_evaluate)
    graph = small_graph()
    loop = make_loop(graph, epochs=50, patience=3)
    assert loop.needs_final_evaluation  # nothing validated yet
    result = loop.run(ListFeed(graph))
    assert not loop.needs_final_evaluation
    assert result.stopped_early and result.epochs == 5  # best 0.7 at epoch 2, then three worse
    assert result.val_history == [(1.0, 0.5), (2.0, 0.7), (3.0, 0.6), (4.0, 0.65), (5.0, 0.69)]
    assert result.best_val_epoch == 2.0
    # The best weights' test score comes from their own validation pass: five passes, none at the end.
    assert (result.val_score, result.test_score) == (0.7, 0.8) and len(splits_asked) == 5
    assert result.evaluation == "complete"


def test_checkpoint_resume_continues_the_same_epoch_count(tmp_path):
    graph = small_graph()
    first = make_loop(graph, tmp_path, epochs=10, max_steps=6, patience=0, checkpoint_every_steps=1)
    r1 = first.run(ListFeed(graph))
    second = make_loop(graph, tmp_path, epochs=3, patience=0)
    assert second.state.steps == 6 and second.progress.epoch == 1
    assert abs(second.progress.epoch_fraction - 0.5) < 1e-9  # 6 subgraphs x 10 / 40 = 1.5 epochs
    torch.testing.assert_close(
        dict(second.state.model.named_parameters())["layers.0.weight"],
        dict(first.state.model.named_parameters())["layers.0.weight"],
    )
    r2 = second.run(ListFeed(graph))
    assert r1.steps == 6 and r2.resumed_from_step == 6 and r2.steps == 12 and r2.epochs == 3
    # The resumed run still reports every step's loss: the checkpoint carried the first six.
    assert len(r2.step_losses) == 12 and r2.step_losses[:6] == r1.step_losses
    assert r2.step_epochs == [0] * 4 + [1] * 4 + [2] * 4
    assert [epoch for epoch, _ in r2.val_history] == [1.0, 2.0, 3.0]


def test_early_stopping_state_round_trips():
    model = torch.nn.Linear(2, 2)
    stop = EarlyStopping(patience=2)
    assert not stop.update(0.5, 1, model)
    assert not stop.update(0.4, 2, model)
    copy = EarlyStopping(patience=2)
    copy.load_state_dict(stop.state_dict())
    assert copy.update(0.45, 3, model)  # second bad round in a row
    assert copy.best == 0.5 and copy.best_step == 1


def test_a_final_evaluation_past_the_deadline_is_cut_and_the_result_says_so():
    graph = small_graph()
    loop = make_loop(graph, epochs=50, patience=0, eval_every=1000, max_steps=3)  # never validated in training
    loop.watch.cut_at(time.time() - 1.0)  # the run's deadline has passed already
    result = loop.run(ListFeed(graph))
    assert result.steps == 3 and result.evaluation == "cut at the deadline"
    assert np.isnan(result.test_score) and np.isnan(result.val_score)
    assert len(result.step_losses) == 3  # what the trainer did is still reported
    loop.watch.cut_at(None)
    again = make_loop(graph, epochs=50, patience=0, eval_every=1000, max_steps=3).run(ListFeed(graph))
    assert again.evaluation == "complete" and 0.0 <= again.test_score <= 1.0
    assert again.final_evaluation_seconds > 0


def test_a_cancelled_validation_is_skipped_and_training_goes_on(monkeypatch):
    import saintpipe.trainer.loop as loop_mod
    from saintpipe.trainer.eval_watch import EvaluationCancelled

    calls = []

    def evaluate(model, graph, splits, **kw):
        calls.append(splits)
        if len(calls) == 2:  # the second validation is cut (the runner cancelled it)
            raise EvaluationCancelled("evaluation cancelled")
        return {"val": 0.5 + 0.1 * len(calls), "test": 0.25 * len(calls)}

    monkeypatch.setattr(loop_mod, "evaluate", evaluate)
    graph = small_graph()
    result = make_loop(graph, epochs=3, patience=0).run(ListFeed(graph))
    assert result.steps == 12 and len(calls) == 3
    assert result.val_history == [(1.0, 0.6), (3.0, 0.8)]  # epoch 2's validation left no trace
    assert (result.val_score, result.test_score) == (0.8, 0.75)  # the best's own pass scored its test split


def test_a_snapshot_reports_the_work_so_far_without_scoring(monkeypatch):
    graph = small_graph()
    loop = make_loop(graph, epochs=2, patience=0)
    empty = loop.snapshot()
    assert empty.steps == 0 and empty.evaluation == "not run" and np.isnan(empty.val_score)
    loop.run(ListFeed(graph))
    snap = loop.snapshot()
    assert snap.steps == 8 and len(snap.step_losses) == 8 and snap.times.compute > 0
    assert snap.evaluation == "not run" and snap.val_score == loop.stopper.best
