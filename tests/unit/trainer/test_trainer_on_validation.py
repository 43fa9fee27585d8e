"""The loop's validation hook (``on_validation``, through build_loop): a sweep's trial reports each validation."""

from __future__ import annotations

from saintpipe.trainer.assemble import build_loop
from saintpipe.trainer.config import ModelConfig, TrainerConfig
from saintpipe.trainer.step import TrainState

from test_trainer_feeds_loop import ListFeed, small_graph


def test_each_validation_reaches_the_hook_after_it_is_recorded():
    graph = small_graph()
    model = ModelConfig(arch="gcn", hidden=[8], dropout=0.0)
    seen: list[tuple[float, float, int]] = []
    loop = build_loop(TrainState(model, 5, 3, False, seed=0), graph, TrainerConfig(model=model, epochs=3, patience=0),
                      on_validation=lambda epoch, score, step: seen.append((epoch, score, step)))
    result = loop.run(ListFeed(graph))
    # 4 subgraphs per epoch: one validation per epoch, with the loop's own record of it.
    assert [(e, s) for e, _, s in seen] == [(1.0, 4), (2.0, 8), (3.0, 12)]
    assert [score for _, score, _ in seen] == [score for _, score in result.val_history]


def test_without_a_hook_the_loop_runs_as_before():
    graph = small_graph()
    model = ModelConfig(arch="gcn", hidden=[8], dropout=0.0)
    loop = build_loop(TrainState(model, 5, 3, False, seed=0), graph, TrainerConfig(model=model, epochs=1, patience=0))
    assert loop.run(ListFeed(graph)).epochs == 1
