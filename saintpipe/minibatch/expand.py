"""Node sets from the pool back into whole subgraphs, over a dataset's topology (a consumer's copy).

With the pool's ``wire = "nodes"`` a sampler sends a subgraph as its node set and an
:class:`~saintpipe.core.subgraph.Induction` (a few KB instead of megabytes); the trainer then does the
induction FastSample fuses into sampling: the CSR from the dataset's topology (which every trainer opens for
evaluation anyway), the aggregator weights and their transpose (Algorithm 6), and the loss weights, from the
normalization the samplers stored with the dataset (``DATASET/norm/<key>/``). The result is bit for bit the
subgraph the sampler would have sent whole, so nothing downstream changes. Node sets drawn from the training
graph (``[samplers] graph = "train"``) carry global ids like any other; their normalization's ``meta.json``
says ``graph: train``, and they are induced on the training graph stored with the dataset
(``DATASET/train_graph/``): its degrees and CSR positions are what that normalization's coefficients index.
(Without a normalization the full graph gives the same arrays: a node set of training nodes induces the same
edges in both, and the plain weights depend only on those.) The induction is the sampler's own kernel
(:func:`saintpipe.services.sampler.kernels.induce.induce_node_set`), reached through this layer: the trainer
itself never imports the sampler.

A :class:`SubgraphExpander` is what a trainer passes to the pool's ``get``
(through :class:`~saintpipe.minibatch.feed.PoolFeed`): it runs on the prefetch
thread, overlapping the step in progress. It tells two failures apart:

* :class:`~saintpipe.core.errors.DecodeError`: the entry itself is unusable
  (the pool dead-letters it, with the reason);
* :class:`~saintpipe.core.errors.ConfigError`: the entry is fine but this trainer cannot induce it: another
  graph, another training split, or a normalization its dataset directory does not hold. The pool leaves the
  entry for another consumer and the error ends this trainer, naming the path to fix (or use ``wire =
  "full"``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from saintpipe.core.errors import ConfigError, DatasetError, DecodeError
from saintpipe.core.subgraph import ALL_TRAIN_NODES, Induction, Subgraph, SubgraphNodes
from saintpipe.services.dataset.normalization import NORM_DIR, read_stored
from saintpipe.services.dataset.sample_graph import train_digest
from saintpipe.services.dataset.train_graph import TrainGraph, load_train_graph
from saintpipe.services.sampler.kernels.induce import induce_node_set

_INDUCED = -1  # induce_node_set's bad_row when the pattern is symmetric

_EMPTY_F32 = np.empty(0, dtype=np.float32)
_EMPTY_U8 = np.empty(0, dtype=np.uint8)
for _empty in (_EMPTY_F32, _EMPTY_U8):
    _empty.flags.writeable = False


class SubgraphExpander:
    """Induces node sets on one dataset's topology; call it with a :class:`SubgraphNodes`.

    Thread-safe (one expansion at a time: they share scratch arrays of the graph's size).

    Args:
        dataset: the trainer's opened dataset (:func:`saintpipe.services.dataset.store.open_dataset`):
            its path, topology and ``train`` split.

    Raises (on call):
        DecodeError: node ids outside this graph.
        ConfigError: an entry this trainer's dataset cannot induce (see the module docstring).
        DatasetError: the stored normalization is unreadable, or the graph is not symmetric.
    """

    def __init__(self, dataset: Any) -> None:
        self.path = Path(dataset.path)
        self._indptr = _readonly(dataset.indptr, np.int64)
        self._indices = _readonly(dataset.indices, np.int32)
        self.num_nodes = int(self._indptr.size - 1)
        self.num_edges = int(self._indices.size)
        self._train = dataset.splits.get("train")
        self._train_digest: str | None = None
        self._train_mask: np.ndarray | None = None
        # Scratch of the graph's size (0.19 bytes a node: a bit and a rank per 64 nodes), per graph ("full",
        # "train"), made on the first node set: a trainer fed whole subgraphs never pays for it.
        self._scratch: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._norms: dict[tuple[str, int, int, str], tuple[np.ndarray, np.ndarray, TrainGraph | None]] = {}
        self._train_graph: TrainGraph | None = None  # read on the first node set drawn from it
        self._lock = threading.Lock()

    def __call__(self, nodes: SubgraphNodes) -> Subgraph:
        """The whole subgraph of ``nodes``: equal, array for array, to what its sampler would have sent."""
        ind = nodes.induction
        if (ind.graph_nodes, ind.graph_edges) != (self.num_nodes, self.num_edges):
            raise ConfigError(
                f"pool entry of worker {nodes.worker} sequence {nodes.sequence}: sampled from a graph of "
                f"{ind.graph_nodes} nodes and {ind.graph_edges} edges, but this trainer's dataset {self.path} has "
                f"{self.num_nodes} and {self.num_edges}: point the trainers at the samplers' dataset"
            )
        ids = nodes.node_ids
        if ids.size and not (0 <= ids[0] and ids[-1] < self.num_nodes):  # the decoder checked; cheap to be sure
            raise DecodeError(f"subgraph nodes: ids outside [0, {self.num_nodes})")
        mask = self._mask(ind.train_nodes)
        alpha, loss_coef, train_graph = self._normalization(ind)
        if train_graph is None:
            return self._induce(nodes, ids, (self._indptr, self._indices), "full", alpha, mask, loss_coef,
                                f"{self.path}: the graph")
        # On the training graph, as the sampler drew there (every node trains: no mask).
        local = train_graph.to_local(ids)
        if local is None:
            raise DecodeError(f"subgraph nodes of worker {nodes.worker} sequence {nodes.sequence}: a node is not in "
                              "the training graph its normalization was made on")
        return self._induce(nodes, local, (train_graph.indptr, train_graph.indices), "train", alpha, _EMPTY_U8,
                            loss_coef, f"{train_graph.where}: the training graph")

    def _induce(self, nodes: SubgraphNodes, ids: np.ndarray, csr: tuple[np.ndarray, np.ndarray], graph: str,
                alpha: np.ndarray, mask: np.ndarray, loss_coef: np.ndarray, what: str) -> Subgraph:
        """The sampler's induction of ``ids`` (in ``csr``'s numbering) on the full or the training ``graph``."""
        with self._lock:  # one expansion at a time per graph's scratch
            scratch = self._scratch.get(graph)
            if scratch is None:
                scratch = self._scratch[graph] = _scratch(csr[0].size - 1)
            bad_row, indptr, indices, weights, weights_t, loss = induce_node_set(
                csr[0], csr[1], *scratch, ids, alpha, mask, loss_coef)
        if bad_row != _INDUCED:
            raise DatasetError(f"{what} is not symmetric: node {int(nodes.node_ids[bad_row])} has an edge whose "
                               "reverse is missing")
        return Subgraph(node_ids=nodes.node_ids, indptr=indptr, indices=indices, edge_weights=weights,
                        edge_weights_t=weights_t, loss_weights=loss, job_id=nodes.job_id, worker=nodes.worker,
                        sequence=nodes.sequence, seed=nodes.seed)

    def _training_graph(self, directory: Path) -> TrainGraph:
        """The dataset's stored training graph (checksums checked once), for a normalization made on it."""
        if self._train_graph is None:
            graph = load_train_graph(self.path)
            if graph is None:
                raise ConfigError(
                    f"pool entry: its weights use the normalization {directory.name}, made on the training graph, "
                    f"which this trainer's dataset does not hold ({self.path / 'train_graph'} is missing): trainers "
                    "need the samplers' dataset directory with its train_graph/ folder, or pool wire 'full'")
            self._train_graph = TrainGraph(indptr=_readonly(graph.indptr, np.int64),
                                           indices=_readonly(graph.indices, np.int32),
                                           nodes=_readonly(graph.nodes, np.int64), where=graph.where)
        return self._train_graph

    def _mask(self, wanted: str) -> np.ndarray:
        """The training-node mask the sampler restricted loss weights to (empty: every node trains)."""
        if wanted == ALL_TRAIN_NODES:
            return _EMPTY_U8
        if self._train_digest is None:
            self._train_digest = train_digest(self._train) if self._train is not None else ALL_TRAIN_NODES
        if wanted != self._train_digest:
            raise ConfigError(
                f"pool entry: its loss weights are over training nodes with digest {wanted}, but the train split "
                f"of this trainer's dataset {self.path} has digest {self._train_digest}: point the trainers at the "
                "samplers' dataset"
            )
        if self._train_mask is None:  # one bit per node, as the sampler's kernels read it
            mask = np.zeros(self.num_nodes, dtype=bool)
            mask[np.asarray(self._train)] = True
            packed = np.packbits(mask, bitorder="little")
            packed.flags.writeable = False
            self._train_mask = packed
        return self._train_mask

    def _normalization(self, ind: Induction) -> tuple[np.ndarray, np.ndarray, TrainGraph | None]:
        """(alpha, loss coefficients, the training graph when they index it) of the entry's normalization,
        read once per key (empty arrays: none)."""
        if not ind.normalization:
            return _EMPTY_F32, _EMPTY_F32, None
        key = (ind.normalization, int(ind.norm_subgraphs), int(ind.norm_seed), ind.train_nodes)
        cached = self._norms.get(key)
        if cached is not None:
            return cached
        directory = self.path / NORM_DIR / ind.normalization  # the key was checked to be one path component
        if not directory.is_dir():
            raise ConfigError(
                f"pool entry: its weights use the normalization {ind.normalization}, which this trainer's dataset "
                f"does not hold ({directory} is missing): trainers need the samplers' dataset directory with its "
                "norm/ folder, or pool wire 'full'"
            )
        loss, alpha, meta = read_stored(directory)
        wanted = {"config_key": ind.normalization, "num_subgraphs": int(ind.norm_subgraphs),
                  "seed": int(ind.norm_seed), "num_nodes": self.num_nodes, "num_edges": self.num_edges}
        if ind.train_nodes != ALL_TRAIN_NODES:
            wanted["train_nodes"] = ind.train_nodes
        differ = sorted(k for k, v in wanted.items() if meta.get(k) != v)
        if differ:
            raise ConfigError(
                f"pool entry: the normalization in {directory} was made with other settings than the samplers' "
                f"({', '.join(f'{k} {meta.get(k)!r} != {wanted[k]!r}' for k in differ)}): it was re-estimated "
                "since; restart the samplers, or use pool wire 'full'"
            )
        graph = self._training_graph(directory) if meta.get("graph", "full") == "train" else None
        nodes, edges = (self.num_nodes, self.num_edges) if graph is None else (graph.num_nodes, graph.num_edges)
        if alpha.shape != (edges,) or loss.shape != (nodes,):
            raise DatasetError(f"{directory}: coefficient shapes {alpha.shape} and {loss.shape} do not fit the graph "
                               f"({edges} edges, {nodes} nodes)")
        cached = (_readonly(alpha, np.float32), _readonly(loss, np.float32), graph)
        self._norms[key] = cached
        return cached


def _scratch(num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The induction's membership bitset (all 0) and rank per word, for a graph of ``num_nodes``."""
    words = (num_nodes + 63) // 64
    return np.zeros(words, dtype=np.uint64), np.zeros(words, dtype=np.int32)


def _readonly(array: np.ndarray, dtype: type) -> np.ndarray:
    """A C-contiguous read-only view as ``dtype``, converted as the sampler converts it (copies only when it must)."""
    out = np.ascontiguousarray(array, dtype=dtype).view(np.ndarray)
    out.flags.writeable = False
    return out
