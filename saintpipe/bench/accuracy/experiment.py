"""Accuracy experiment: subgraph training with each GraphSAINT sampler vs Kipf and Welling's full-batch GCN.

On the Planetoid citation graphs, the same GCN (:data:`DEFAULT_MODEL`) trained by the trainer's loop on the
random walk, node, edge and frontier samplers' subgraphs, read through a real pool
(:class:`~saintpipe.bench.accuracy.local_pool.InProcessPool`), against the published full-batch recipe
(:mod:`saintpipe.bench.accuracy.full_batch`). ``graphs``: ``full`` draws from the whole graph (transductive),
``train`` from the graph induced by the training nodes (GraphSAINT's inductive protocol). The protocols and
figures: docs/benchmarks/accuracy.md.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from saintpipe.core.bars import ProgressBar
from saintpipe.core.errors import DatasetError, InvalidArgument
from saintpipe.bench.accuracy.settings import PUBLISHED_GCN, SAMPLERS, SamplingSetup
from saintpipe.bench.accuracy.full_batch import KipfRecipe, row_normalize, train_kipf_gcn
from saintpipe.bench.accuracy.local_pool import InProcessPool
from saintpipe.trainer.config import ModelConfig, TrainerConfig
from saintpipe.trainer.evaluate import EvalGraph
from saintpipe.trainer.assemble import build_loop, new_state

log = logging.getLogger(__name__)

# Kipf's GCN in the trainer's terms: a GCN layer of width 16 and a graph classifier (Â·H·W), no bias,
# dropout 0.5, weight decay 5e-4, Adam 0.01. What still differs: Â's random-walk form and the decay on
# both layers (docs/benchmarks/accuracy.md measures both on the full-batch GCN).
DEFAULT_MODEL = ModelConfig(arch="gcn", hidden=[16], classifier="graph", bias=False, dropout=0.5, lr=0.01,
                            weight_decay=5e-4)
FULL_BATCH = "full-batch"
GRAPHS = ("full", "train")


@dataclass(frozen=True)
class SampledGraph:
    """The graph one protocol's subgraphs are drawn from (see the module docstring).

    Attributes:
        kind: ``full`` or ``train``.
        indptr, indices: its CSR; train_nodes: the nodes the loss is restricted to, in its ids (None: all).
        node_map: global id of each of its nodes (None: its ids are global).
        degrees: int [N] degrees for the training batches' self-loops (None: the full graph's).
    """

    kind: Literal["full", "train"]
    indptr: np.ndarray
    indices: np.ndarray
    train_nodes: np.ndarray | None
    node_map: np.ndarray | None = None
    degrees: np.ndarray | None = None


def sampled_graph(graph: EvalGraph, kind: str = "full") -> SampledGraph:
    """The graph ``kind`` (``full`` or ``train``) of ``graph`` that subgraph runs sample."""
    if kind == "full":
        return SampledGraph("full", graph.indptr, graph.indices, graph.splits["train"])
    if kind != "train":
        raise InvalidArgument(f"unknown graph {kind!r}; graphs: {', '.join(GRAPHS)}")
    from saintpipe.services.dataset.train_graph import build_train_graph, induced_degrees

    train = graph.splits["train"]
    tg = build_train_graph(graph.indptr, graph.indices, train)
    return SampledGraph("train", tg.indptr, tg.indices, None, tg.nodes,
                        induced_degrees(graph.indptr, graph.indices, train))


def load_planetoid(path: Path | str, *, normalize_features: bool = True) -> EvalGraph:
    """A Planetoid ``.npz`` (indptr, indices, features, labels, train/val/test masks) as an EvalGraph.

    With ``normalize_features`` every feature row is divided by its sum
    (:func:`~saintpipe.bench.accuracy.full_batch.row_normalize`, the GCN recipe's preprocessing):
    the full-batch and the subgraph runs read the same inputs.
    """
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
    features = arrays["features"].astype(np.float32)
    return EvalGraph.from_arrays(
        arrays["indptr"].astype(np.int64),
        arrays["indices"].astype(np.int32),
        row_normalize(features) if normalize_features else features,
        arrays["labels"].astype(np.int64),
        splits,
    )


def normalization_for(graph: EvalGraph | SampledGraph, kind: str, sampling: SamplingSetup, seed: int):
    """The :class:`~saintpipe.services.sampler.coefficients.Normalization` of ``kind``'s runs, or None.

    ``graph``: the graph sampled (an EvalGraph: its full graph).

    Pre-sampling (``smoothed``, ``reference``) draws ``sampling.norm_subgraphs`` subgraphs in this
    process from ``seed``'s pre-sampling stream; ``online`` starts from the prior and the run's sampler
    refines it from the first ``sampling.norm_subgraphs`` subgraphs it produces (as the sampler service does).

    Raises:
        InvalidArgument: ``exact`` for a sampler without closed-form probabilities (random walk, frontier).
    """
    from saintpipe.services.sampler.config import config_key
    from saintpipe.services.sampler.normalization import (
        DEFAULT_STRENGTH,
        Normalization,
        build_normalization,
        closed_form_coefficients,
    )

    method = sampling.method(kind)
    config = sampling.sampler_config(kind)
    graph = graph if isinstance(graph, SampledGraph) else sampled_graph(graph)
    train = graph.train_nodes
    if method == "none":
        return None
    if method == "online":
        loss, alpha = closed_form_coefficients(graph.indptr, graph.indices, config, train)
        # As the sampler service does: count the first norm_subgraphs subgraphs, then keep the coefficients.
        return Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, config_key=config_key(config),
                             num_subgraphs=sampling.norm_subgraphs, method="online", strength=DEFAULT_STRENGTH)
    try:
        return build_normalization(graph.indptr, graph.indices, config, method=method, train_nodes=train,
                                   num_subgraphs=sampling.norm_subgraphs, seed=seed, processes=1)
    except InvalidArgument as exc:
        raise InvalidArgument(f"--normalization {method} with the {kind} sampler: {exc}") from None


def train_subgraphs(
    graph: EvalGraph,
    model: ModelConfig,
    epochs: int,
    seed: int,
    kind: str = "random_walk",
    sampling: SamplingSetup = SamplingSetup(),
    *,
    redis_url: str | None = None,
    sampled: SampledGraph | None = None,
) -> dict:
    """Training on ``kind``'s subgraphs (normalized as ``sampling`` says) with the trainer's loop.

    The subgraphs reach the loop through a subgraph pool (see the module docstring) on the Redis at
    ``redis_url`` (default: a private one started for this run). ``sampled``: the graph they are drawn
    from (:func:`sampled_graph`; default the full graph).

    Returns:
        ``{"val", "test", "epochs", "steps"}``: the scores of the best-validation weights.
    """
    from saintpipe.services.sampler.parallel import subgraph_seed
    from saintpipe.services.sampler.sampler import make_sampler

    sampled = sampled if sampled is not None else sampled_graph(graph)
    norm = normalization_for(sampled, kind, sampling, seed)
    sampler = make_sampler(sampling.sampler_config(kind), sampled.indptr, sampled.indices, normalization=norm,
                           train_nodes=sampled.train_nodes, node_map=sampled.node_map)
    seeds = (subgraph_seed(seed, 0, i) for i in range(1 << 62))
    config = TrainerConfig(model=model, epochs=epochs, patience=0, seed=seed, sample_graph=sampled.kind)
    loop = build_loop(new_state(config, graph), graph, config, sampled_degrees=sampled.degrees)
    with InProcessPool(sampler, seeds, graph.gather, redis_url=redis_url, prefetch=config.prefetch) as feed:
        result = loop.run(feed)
    return {
        "val": result.val_score,
        "test": result.test_score,
        "epochs": result.epochs,
        "steps": result.steps,
    }


def subgraph_sizes(graph: EvalGraph, kind: str, sampling: SamplingSetup, count: int = 64,
                   sampled: SampledGraph | None = None) -> dict[str, float]:
    """Mean nodes, training nodes and edges of ``count`` subgraphs of ``kind`` (seeds apart from the runs')."""
    from saintpipe.services.sampler.parallel import stream_seed
    from saintpipe.services.sampler.sampler import make_sampler

    sampled = sampled if sampled is not None else sampled_graph(graph)
    sampler = make_sampler(sampling.sampler_config(kind), sampled.indptr, sampled.indices,
                           node_map=sampled.node_map)
    train = graph.train_mask()
    nodes, labelled, edges = [], [], []
    for i in range(count):
        sub = sampler.sample(stream_seed(0, _SIZE_STREAM, i))
        nodes.append(sub.node_ids.size)
        labelled.append(int(train[sub.node_ids].sum()))
        edges.append(sub.indices.size)
    return {"nodes": statistics.fmean(nodes), "train_nodes": statistics.fmean(labelled),
            "edges": statistics.fmean(edges)}


# spawn_key tag of the subgraphs that measure sizes: never a training run's or a pre-sampling's.
_SIZE_STREAM = 0x512E


def compare(
    datasets: dict[str, Path],
    seeds: list[int],
    epochs: int,
    model: ModelConfig = DEFAULT_MODEL,
    sampling: SamplingSetup = SamplingSetup(),
    samplers: Sequence[str] = SAMPLERS,
    recipe: KipfRecipe = KipfRecipe(),
    graphs: Sequence[str] = ("full",),
) -> list[dict]:
    """Mean ± std test accuracy per dataset: Kipf's full-batch GCN, then each sampler's subgraph runs on
    each graph of ``graphs`` (the protocols: ``full``, ``train``; see the module docstring).

    For each seed, the full-batch run and every sampler's run follow each other (so a long run
    interrupted keeps comparable columns). One private Redis serves every subgraph run (a pool job each).
    """
    from saintpipe.services.pool.redis_server import RedisServer

    for kind in samplers:
        sampling.sampler_config(kind)  # an unknown sampler fails before any training
    if not graphs or set(graphs) - set(GRAPHS):
        raise InvalidArgument(f"graphs {','.join(graphs)!r}: expected some of {','.join(GRAPHS)}")
    rows = []
    with RedisServer(use_env=False) as redis_server:  # never SAINTPIPE_REDIS_URL's; stopped at the end
        for name, path in datasets.items():
            graph = load_planetoid(path)
            sampled = {g: sampled_graph(graph, g) for g in graphs}
            runs: dict[tuple[str, str], list[float]] = {(FULL_BATCH, ""): []}
            runs.update({(kind, g): [] for g in graphs for kind in samplers})
            for seed in ProgressBar(seeds, desc=f"accuracy {name}", unit="seed"):
                runs[FULL_BATCH, ""].append(train_kipf_gcn(graph, seed, recipe)["test"])
                for g in graphs:
                    for kind in samplers:
                        result = train_subgraphs(graph, model, epochs, seed, kind, sampling, redis_url=redis_server.url,
                                                 sampled=sampled[g])
                        runs[kind, g].append(result["test"])
                log.info("%s seed %d: %s", name, seed, {"/".join(filter(None, k)): v[-1] for k, v in runs.items()})
            sizes = {(kind, g): subgraph_sizes(graph, kind, sampling, sampled=sampled[g])
                     for g in graphs for kind in samplers}
            rows.extend(_rows(name, runs, sampling, sizes))
    return rows


def _rows(name: str, runs: dict[tuple[str, str], list[float]], sampling: SamplingSetup,
          sizes: dict[tuple[str, str], dict[str, float]]) -> list[dict]:
    """One row per training of one dataset: mean ± std of its test scores over the seeds, and the gap."""
    full = statistics.fmean(runs[FULL_BATCH, ""])
    rows = []
    for (training, graph), scores in runs.items():
        mean = statistics.fmean(scores)
        size = sizes.get((training, graph), {})
        rows.append({
            "dataset": name,
            "training": training,
            "graph": graph,
            "normalization": "" if training == FULL_BATCH else sampling.method(training),
            "subgraph_nodes": round(size["nodes"], 1) if size else "",
            "subgraph_train_nodes": round(size["train_nodes"], 1) if size else "",
            "test_mean": mean,
            "test_std": statistics.pstdev(scores),
            "minus_full_points": 100 * (mean - full),
            "published": PUBLISHED_GCN.get(name, "") if training == FULL_BATCH else "",
            "seeds": len(scores),
            "min": min(scores),
            "max": max(scores),
            "scores": [round(x, 4) for x in scores],
        })
    return rows


def summary_of(rows: list[dict]) -> dict[str, float]:
    """The summary: ``<dataset>_full`` and ``<dataset>_<sampler>`` (mean test accuracy, a fraction) and
    ``<dataset>_<sampler>_minus_full_points`` (the sampler's mean minus full-batch's, in points).

    The keys of runs on the training graph (the inductive protocol) name it: ``<dataset>_<sampler>_train_graph``
    and ``<dataset>_<sampler>_train_graph_minus_full_points``; those on the full graph keep the plain keys.
    """
    out: dict[str, float] = {}
    for row in rows:
        if row["training"] == FULL_BATCH:
            out[f"{row['dataset']}_full"] = row["test_mean"]
        else:
            key = f"{row['dataset']}_{row['training']}" + ("_train_graph" if row.get("graph") == "train" else "")
            out[key] = row["test_mean"]
            out[f"{key}_minus_full_points"] = row["minus_full_points"]
    return out

