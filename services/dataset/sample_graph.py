"""The graph samplers draw from: a dataset's full graph, or its training graph (``[samplers] graph``).

* ``full`` (transductive, what PyG's loaders do): subgraphs come from the
  whole graph; the split only decides which nodes weigh in the loss.
* ``train`` (inductive, GraphSAINT's protocol): subgraphs come from the graph
  induced by the training nodes (:mod:`saintpipe.services.dataset.train_graph`),
  so validation and test nodes never appear in training.
* ``auto``: the dataset manifest's ``sample_graph`` (``train`` for a
  GraphSAINT-format import, which ships ``adj_train``; ``full`` otherwise).

A :class:`SampleGraph` is what the samplers, the normalization estimators and
its store need of either: a CSR, the nodes the loss is restricted to (in the
graph's own ids), and the map from those ids to the dataset's (global) ids,
which subgraphs carry so that trainers and feature shards see no difference.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from saintpipe.core.errors import ConfigError

GRAPHS = ("full", "train")


def train_digest(train_nodes: np.ndarray | None) -> str:
    """A short digest of the training node ids (``"all"`` for None), recorded in ``meta.json``."""
    if train_nodes is None:
        return "all"
    return hashlib.sha256(np.ascontiguousarray(train_nodes, dtype=np.int64).tobytes()).hexdigest()[:16]


def resolve_graph(choice: str, manifest_graph: str) -> str:
    """``full`` or ``train``: ``choice``, with ``auto`` meaning the manifest's ``sample_graph``."""
    resolved = manifest_graph if choice == "auto" else choice
    if resolved not in GRAPHS:
        raise ConfigError(f"samplers graph: {choice!r} is not one of auto, full, train")
    return resolved


@dataclass(frozen=True)
class SampleGraph:
    """The graph a job samples from, with what normalization and induction need to know of it.

    Attributes:
        kind: ``full`` or ``train``.
        path: the dataset directory (normalizations are stored there).
        indptr, indices: its CSR (int64 / int32), over its own ids.
        train_nodes: ids (its own) the loss weights are restricted to; None: every node trains.
        nodes: int64 [n] global id of each of its nodes (ascending); None: its ids are the global ids.
        dataset_nodes, dataset_edges: the dataset's full graph, which the global ids index.
        train_digest: digest of the dataset's train split (:func:`train_digest`).
        stored: whether trainers find this graph in the dataset directory (always, for the full graph).
    """

    kind: str
    path: Path
    indptr: np.ndarray
    indices: np.ndarray
    train_nodes: np.ndarray | None
    nodes: np.ndarray | None
    dataset_nodes: int
    dataset_edges: int
    train_digest: str
    stored: bool = True

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.size)


def full_graph(dataset: Any) -> SampleGraph:
    """The dataset's whole graph (an opened :class:`~saintpipe.services.dataset.store.Dataset`)."""
    train = dataset.splits["train"]
    return SampleGraph(kind="full", path=Path(getattr(dataset, "path", ".")), indptr=dataset.indptr,
                       indices=dataset.indices, train_nodes=train, nodes=None,
                       dataset_nodes=int(len(dataset.indptr) - 1), dataset_edges=int(len(dataset.indices)),
                       train_digest=train_digest(train))


def training_graph(dataset: Any, graph: Any) -> SampleGraph:
    """The dataset's training graph ``graph`` (a :class:`~saintpipe.services.dataset.train_graph.TrainGraph`)."""
    return SampleGraph(kind="train", path=Path(dataset.path), indptr=graph.indptr, indices=graph.indices,
                       train_nodes=None, nodes=graph.nodes, dataset_nodes=int(dataset.num_nodes),
                       dataset_edges=int(dataset.num_edges), train_digest=train_digest(dataset.splits["train"]),
                       stored=graph.stored)


def open_sample_graph(dataset: Any, choice: str = "auto") -> SampleGraph:
    """The graph ``choice`` of an opened dataset; the training graph is opened, or built and stored, here.

    Raises:
        ConfigError: an unknown choice. DatasetError: a stored training graph that is torn or edited.
    """
    kind = resolve_graph(choice, dataset.manifest.sample_graph)
    if kind == "full":
        return full_graph(dataset)
    from saintpipe.services.dataset.train_graph import open_or_build

    return training_graph(dataset, open_or_build(dataset))


def as_sample_graph(graph: Any) -> SampleGraph:
    """``graph`` itself, or the full graph of an opened dataset."""
    return graph if isinstance(graph, SampleGraph) else full_graph(graph)


def sampled_degrees(dataset: Any, choice: str = "auto") -> np.ndarray | None:
    """int64 [N] degrees in the graph ``choice`` of an opened dataset, for the self-loops of training batches;
    None for the full graph (whose degrees the trainer has). On the training graph: each training node's
    number of training neighbours (0 elsewhere: those nodes are never sampled), read from the stored training
    graph when there is a sound one, else counted in one pass over the training nodes' rows."""
    if resolve_graph(choice, dataset.manifest.sample_graph) == "full":
        return None
    from saintpipe.core.errors import DatasetError
    from saintpipe.services.dataset.train_graph import induced_degrees, load_train_graph

    try:
        stored = load_train_graph(dataset.path, dataset.manifest)
    except DatasetError:  # torn or stale: the samplers build it again; count here meanwhile
        stored = None
    if stored is None:
        return induced_degrees(dataset.indptr, dataset.indices, dataset.splits["train"])
    degrees = np.zeros(int(dataset.num_nodes), dtype=np.int64)
    degrees[stored.nodes] = np.diff(stored.indptr)
    return degrees
