"""The sampled subgraph: what samplers produce, the pool carries and trainers consume.

Conventions (shared by every component):

* Local node ``i`` is global node ``node_ids[i]``; ``node_ids`` is int64 and
  sorted ascending, so local order follows global order.
* ``indptr`` (int64 [n+1]) and ``indices`` (int32 [e], local ids, each row
  sorted ascending) are the induced adjacency in CSR. Row ``v`` lists the
  neighbours ``u`` that ``v`` aggregates from.
* ``edge_weights[k]`` (float32 [e]) is the aggregator-normalized weight of the
  entry at position ``k`` = (row v, column u): the forward pass computes
  ``h_v = sum_k edge_weights[k] * x_{indices[k]}`` over row v.
* ``edge_weights_t[k]`` is the weight of the transposed matrix at the same
  position: the weight stored at the position of (row u, column v). Because
  the induced subgraph of an undirected graph has a symmetric pattern, the
  backward pass (A^T · G) reuses ``indptr``/``indices`` with these weights —
  Algorithm 6 of the GraphSAINT parallel-training paper — instead of
  transposing at run time.
* ``loss_weights`` (float32 [n]) weights each node's loss (loss normalization).
* ``worker`` and ``sequence`` identify the subgraph within a job; ``seed`` is
  the random seed it was drawn with, so it can be drawn again bit for bit.
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
