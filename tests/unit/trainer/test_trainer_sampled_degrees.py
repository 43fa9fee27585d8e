"""Training batches drawn from the training graph mix their self-loops by its degrees; evaluation keeps the full
graph's."""

from __future__ import annotations

import numpy as np

from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.train_graph import build_train_graph, induced_degrees
from saintpipe.services.sampler.config import RandomWalkConfig
from saintpipe.services.sampler.sampler import make_sampler
from saintpipe.trainer import loop as loop_module
from saintpipe.trainer.config import ModelConfig, TrainerConfig
from saintpipe.trainer.evaluate import EvalGraph
from saintpipe.minibatch.feed import Item
from saintpipe.trainer.loop import TrainLoop
from saintpipe.trainer.step import TrainState


class SamplerFeed:
    def __init__(self, sampler, graph: EvalGraph) -> None:
        self.sampler, self.graph, self.seed = sampler, graph, 0

    def next(self, timeout: float) -> Item:
        self.seed += 1
        sub = self.sampler.sample(self.seed)
        return Item(sub, self.graph.gather(sub.node_ids), 0.0, 0.0, lambda: None)

    def close(self) -> None:
        pass


def test_the_loop_hands_the_sampled_graph_s_degrees_to_its_batches(monkeypatch):
    demo = generate_demo(num_nodes=600, feature_dim=4, num_classes=3, seed=1)
    graph = EvalGraph.from_arrays(demo["indptr"], demo["indices"], demo["features"], demo["labels"], demo["splits"])
    train = demo["splits"]["train"]
    tg = build_train_graph(graph.indptr, graph.indices, train)
    degrees = induced_degrees(graph.indptr, graph.indices, train)
    sampler = make_sampler(RandomWalkConfig(roots=30, clip_multiple=None), tg.indptr, tg.indices, node_map=tg.nodes)
    seen = []
    real = loop_module.batch_from_subgraph

    def spy(sub, features, labels, train_mask, degrees_arg, device="cpu"):
        seen.append(np.asarray(degrees_arg)[sub.node_ids])
        return real(sub, features, labels, train_mask, degrees_arg, device=device)

    monkeypatch.setattr(loop_module, "batch_from_subgraph", spy)
    model = ModelConfig(arch="gcn", hidden=[8], dropout=0.0)
    config = TrainerConfig(model=model, epochs=1, max_steps=2, patience=0, sample_graph="train")
    loop = TrainLoop(TrainState(model, 4, 3, False, seed=0), graph, config, sampled_degrees=degrees)
    loop.run(SamplerFeed(sampler, graph))
    sub = sampler.sample(1)
    assert len(seen) == 2 and np.array_equal(seen[0], degrees[sub.node_ids])
    assert (seen[0] < graph.degrees[sub.node_ids]).any()  # validation/test neighbours are not counted
    assert loop.graph.degrees is graph.degrees  # evaluation: the full graph's
