"""Accuracy experiment: random-walk subgraph training (with and without normalization) vs full-batch.

On the Planetoid citation graphs (Cora, CiteSeer; standard public split) a
model trained on GraphSAINT random-walk subgraphs — sampled in-process by the
Numba kernels of ``saintpipe.services.sampler`` — should score within a few points of
the same model trained full-batch. Both runs use the same model code, the same
optimizer, the same epoch budget (a subgraph epoch is |V_train| / mean labelled
nodes per subgraph) and pick the test score at the best validation score.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from saintpipe.core.errors import DatasetError
from saintpipe.trainer.config import ModelConfig, TrainerConfig
from saintpipe.trainer.evaluate import EvalGraph
from saintpipe.trainer.feeds import SamplerFeed
from saintpipe.trainer.loop import TrainLoop
from saintpipe.trainer.step import EarlyStopping, TrainState

log = logging.getLogger(__name__)

DEFAULT_MODEL = ModelConfig(arch="gcn", hidden=[64, 64], dropout=0.5, lr=0.01, weight_decay=5e-4)


@dataclass(frozen=True)
class SamplingSetup:
    """The random-walk sampler of the subgraph runs and its normalization estimate."""

    roots: int = 300
    walk_length: int = 2
    norm_subgraphs: int = 200


def load_planetoid(path: Path | str) -> EvalGraph:
    """A Planetoid ``.npz`` (indptr, indices, features, labels, train/val/test masks) as an EvalGraph."""
    path = Path(path)
    try:
        data = np.load(path, allow_pickle=False)
        arrays = {
            k: data[k]
            for k in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask")
        }
    except (OSError, ValueError, KeyError) as exc:
        raise DatasetError(
            f"{path}: not a Planetoid npz with indptr/indices/features/labels/masks ({exc})"
        ) from None
    splits = {
        name: np.flatnonzero(arrays[f"{name}_mask"]).astype(np.int64) for name in ("train", "val", "test")
    }
    return EvalGraph.from_arrays(
        arrays["indptr"].astype(np.int64),
        arrays["indices"].astype(np.int32),
        arrays["features"].astype(np.float32),
        arrays["labels"].astype(np.int64),
        splits,
    )


def train_full_batch(graph: EvalGraph, model: ModelConfig, epochs: int, seed: int, patience: int = 0) -> dict:
    """One step per epoch on the whole graph; the test score at the best validation score."""
    from saintpipe.trainer.evaluate import evaluate

    state = TrainState(model, graph.feature_dim, graph.num_classes, graph.multilabel, seed=seed)
    batch = graph.full_batch()
    stopper = EarlyStopping(patience)
    for epoch in range(epochs):
        state.step(batch)
        if stopper.update(evaluate(state.model, graph, ("val",))["val"], state.steps, state.model):
            break
    state.model.load_state_dict(stopper.best_state)
    scores = evaluate(state.model, graph)
    return {"val": scores["val"], "test": scores["test"], "epochs": epoch + 1, "steps": state.steps}


def train_subgraphs(
    graph: EvalGraph,
    model: ModelConfig,
    epochs: int,
    seed: int,
    normalize: bool,
    sampling: SamplingSetup = SamplingSetup(),
    patience: int = 0,
) -> dict:
    """Training on random-walk subgraphs (GraphSAINT normalization optional) with the trainer's loop."""
    from saintpipe.services.sampler.config import RandomWalkConfig
    from saintpipe.services.sampler.normalization import estimate_normalization
    from saintpipe.services.sampler.parallel import subgraph_seed
    from saintpipe.services.sampler.sampler import make_sampler

    cfg = RandomWalkConfig(roots=sampling.roots, walk_length=sampling.walk_length)
    train = graph.splits["train"]
    norm = None
    if normalize:
        norm = estimate_normalization(
            graph.indptr,
            graph.indices,
            cfg,
            num_subgraphs=sampling.norm_subgraphs,
            train_nodes=train,
            seed=seed,
            processes=1,
        )
    sampler = make_sampler(cfg, graph.indptr, graph.indices, normalization=norm, train_nodes=train)
    seeds = (subgraph_seed(seed, 0, i) for i in range(1 << 62))
    state = TrainState(model, graph.feature_dim, graph.num_classes, graph.multilabel, seed=seed)
    loop = TrainLoop(state, graph, TrainerConfig(model=model, epochs=epochs, patience=patience, seed=seed))
    result = loop.run(SamplerFeed(sampler, graph.gather, seeds))
    return {
        "val": result.val_score,
        "test": result.test_score,
        "epochs": result.epochs,
        "steps": result.steps,
    }


def compare(
    datasets: dict[str, Path],
    seeds: list[int],
    epochs: int,
    model: ModelConfig = DEFAULT_MODEL,
    sampling: SamplingSetup = SamplingSetup(),
) -> list[dict]:
    """Mean ± std test accuracy per dataset: full-batch, and subgraphs with and without normalization."""
    rows = []
    for name, path in datasets.items():
        graph = load_planetoid(path)
        runs: dict[str, list[float]] = {"full-batch": [], "rw+norm": [], "rw (no norm)": []}
        for seed in tqdm(seeds, desc=f"accuracy {name}", unit="seed"):
            runs["full-batch"].append(train_full_batch(graph, model, epochs, seed)["test"])
            runs["rw+norm"].append(train_subgraphs(graph, model, epochs, seed, True, sampling)["test"])
            runs["rw (no norm)"].append(train_subgraphs(graph, model, epochs, seed, False, sampling)["test"])
            log.info("%s seed %d: %s", name, seed, {k: v[-1] for k, v in runs.items()})
        for method, scores in runs.items():
            rows.append(
                {
                    "dataset": name,
                    "training": method,
                    "test_mean": statistics.fmean(scores),
                    "test_std": statistics.pstdev(scores),
                    "seeds": len(scores),
                    "min": min(scores),
                    "max": max(scores),
                    "scores": [round(x, 4) for x in scores],
                }
            )
    return rows
