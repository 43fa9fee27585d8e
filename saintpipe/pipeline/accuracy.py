"""Accuracy experiment: random-walk subgraph training (with and without normalization) vs full-batch.

On the Planetoid citation graphs (Cora, CiteSeer; standard public split) a
model trained on GraphSAINT random-walk subgraphs should score within a few
points of the same model trained full-batch. Both runs use the same model
code, the same optimizer, the same epoch budget (a subgraph epoch is
|V_train| / mean labelled nodes per subgraph) and pick the test score at the
best validation score.

The subgraph runs read their subgraphs the way training does: the Numba
kernels of ``saintpipe.services.sampler`` draw them on a producer thread, in
seed order, into a real subgraph pool on a private Redis started for the
experiment, and the trainer's loop takes them through the pool's client
(:class:`~saintpipe.pipeline.local_pool.InProcessPool`: put, get, decode,
ack; same-host shared-memory transport), with features from the in-memory
graph. One producer and one consumer: a seed gives the same run every time.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from saintpipe.core.errors import DatasetError
from saintpipe.pipeline.local_pool import InProcessPool
from saintpipe.trainer.config import ModelConfig, TrainerConfig
from saintpipe.trainer.evaluate import EvalGraph
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
    *,
    redis_url: str | None = None,
) -> dict:
    """Training on random-walk subgraphs (GraphSAINT normalization optional) with the trainer's loop.

    The subgraphs reach the loop through a subgraph pool (see the module docstring) on the Redis at
    ``redis_url`` (default: a private one started for this run).
    """
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
    config = TrainerConfig(model=model, epochs=epochs, patience=patience, seed=seed)
    loop = TrainLoop(state, graph, config)
    with InProcessPool(sampler, seeds, graph.gather, redis_url=redis_url, prefetch=config.prefetch) as feed:
        result = loop.run(feed)
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
    """Mean ± std test accuracy per dataset: full-batch, and subgraphs with and without normalization.

    One private Redis serves every subgraph run of the experiment (a pool job each).
    """
    rows = []
    with _private_redis() as redis_url:
        for name, path in datasets.items():
            graph = load_planetoid(path)
            runs: dict[str, list[float]] = {"full-batch": [], "rw+norm": [], "rw (no norm)": []}
            for seed in tqdm(seeds, desc=f"accuracy {name}", unit="seed"):
                runs["full-batch"].append(train_full_batch(graph, model, epochs, seed)["test"])
                runs["rw+norm"].append(
                    train_subgraphs(graph, model, epochs, seed, True, sampling, redis_url=redis_url)["test"])
                runs["rw (no norm)"].append(
                    train_subgraphs(graph, model, epochs, seed, False, sampling, redis_url=redis_url)["test"])
                log.info("%s seed %d: %s", name, seed, {k: v[-1] for k, v in runs.items()})
            rows.extend(_rows(name, runs))
    return rows


def _rows(name: str, runs: dict[str, list[float]]) -> list[dict]:
    """One row per training method of one dataset: mean ± std of its test scores over the seeds."""
    return [
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
        for method, scores in runs.items()
    ]


@contextlib.contextmanager
def _private_redis() -> Iterator[str]:
    """A private redis-server for the experiment (never ``SAINTPIPE_REDIS_URL``), stopped at the end."""
    from saintpipe.services.pool.redis_server import RedisServer

    with RedisServer(use_env=False) as server:
        yield server.url
