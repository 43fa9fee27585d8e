"""The sampled subgraph: what samplers produce, the pool carries and trainers consume.

Conventions (shared by every component):

* Local node ``i`` is global node ``node_ids[i]``; ``node_ids`` is int64 and
  sorted ascending, so local order follows global order.
* ``indptr`` (int64 [n+1]) and ``indices`` (int32 [e], local ids, each row sorted ascending) are the induced
  adjacency in CSR. Row ``v`` lists the neighbours ``u`` that ``v`` aggregates from.
* ``edge_weights[k]`` (float32 [e]) is the aggregator-normalized weight of the entry at position ``k`` = (row
  v, column u): the forward pass computes ``h_v = sum_k edge_weights[k] * x_{indices[k]}`` over row v.
* ``edge_weights_t[k]`` is the weight of the transposed matrix at the same position: the weight stored at the
  position of (row u, column v). Because the induced subgraph of an undirected graph has a symmetric pattern,
  the backward pass (A^T · G) reuses ``indptr``/``indices`` with these weights — Algorithm 6 of the GraphSAINT
  parallel-training paper — instead of transposing at run time.
* ``loss_weights`` (float32 [n]) weights each node's loss (loss normalization).
* ``worker`` and ``sequence`` identify the subgraph within a job; ``seed`` is
  the random seed it was drawn with, so it can be drawn again bit for bit.

:class:`SubgraphNodes` is the compact form the pool may carry instead (pool
setting ``wire = "nodes"``): the node set and an :class:`Induction`, the few
facts a trainer needs to induce the CSR and compute every weight again from
its own copy of the topology (``saintpipe.minibatch.expand``), bit for bit what
the sampler would have sent. FastSample's hybrid partitioning (topology
replicated on every host) is what makes that possible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Subgraph:
    node_ids: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    edge_weights: np.ndarray
    edge_weights_t: np.ndarray
    loss_weights: np.ndarray
    job_id: str = ""
    worker: int = 0
    sequence: int = 0
    seed: int = 0

    @property
    def num_nodes(self) -> int:
        return int(self.node_ids.size)

    @property
    def num_edges(self) -> int:
        return int(self.indices.size)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.node_ids, self.indptr, self.indices, self.edge_weights,
                                      self.edge_weights_t, self.loss_weights))

    def equals(self, other: "Subgraph") -> bool:
        """Exact equality of every array and identifier."""
        arrays = ("node_ids", "indptr", "indices", "edge_weights", "edge_weights_t", "loss_weights")
        same_meta = (self.job_id, self.worker, self.sequence, self.seed) == (
            other.job_id, other.worker, other.sequence, other.seed)
        return same_meta and all(
            np.array_equal(getattr(self, a), getattr(other, a)) and getattr(self, a).dtype == getattr(other, a).dtype
            for a in arrays
        )


# What Induction.train_nodes says when every node trains (no restriction of the loss weights).
ALL_TRAIN_NODES = "all"


@dataclass(frozen=True)
class Induction:
    """What a trainer needs besides a node set to rebuild the sampler's subgraph exactly.

    Attributes:
        graph_nodes, graph_edges: size of the full graph (nodes, CSR entries) the ids index.
        normalization: key of the GraphSAINT normalization stored with the dataset
            (``DATASET/norm/<normalization>/``); empty for plain mean aggregation and uniform loss.
        norm_subgraphs, norm_seed: the settings that normalization was estimated with.
        train_nodes: digest of the training node ids the loss weights are restricted to
            (``saintpipe.services.dataset.sample_graph.train_digest``), or ``"all"``.
    """

    graph_nodes: int
    graph_edges: int
    normalization: str = ""
    norm_subgraphs: int = 0
    norm_seed: int = 0
    train_nodes: str = ALL_TRAIN_NODES


@dataclass(frozen=True)
class SubgraphNodes:
    """A subgraph as its node set (int64, strictly ascending global ids) and how to induce it again."""

    node_ids: np.ndarray
    induction: Induction
    job_id: str = ""
    worker: int = 0
    sequence: int = 0
    seed: int = 0

    @property
    def num_nodes(self) -> int:
        return int(self.node_ids.size)

    def equals(self, other: "SubgraphNodes") -> bool:
        """Exact equality of the node set, the induction and every identifier."""
        return (
            (self.job_id, self.worker, self.sequence, self.seed, self.induction)
            == (other.job_id, other.worker, other.sequence, other.seed, other.induction)
            and self.node_ids.dtype == other.node_ids.dtype
            and np.array_equal(self.node_ids, other.node_ids)
        )
