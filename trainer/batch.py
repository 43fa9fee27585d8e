"""What one training or evaluation step works on: a graph, its features, labels and loss weights.

A :class:`GraphBatch` is built from a sampled :class:`~saintpipe.core.subgraph.Subgraph`
(:func:`batch_from_subgraph`) or from a whole graph (:func:`full_graph_batch`,
for full-batch training and evaluation). Models read only this object.

Conventions:

* ``adj`` is Ã, the aggregation matrix without self-loops: the subgraph's
  aggregator-normalized weights, or D⁻¹A (mean over neighbours) for a whole graph.
* ``degrees`` are the nodes' degrees in the full graph; GCN, GAT and MixHop mix
  in the self-loop from them (:meth:`~saintpipe.trainer.sparse.SparseOperand.with_self_loops`).
* ``loss_weights`` are zero for nodes without a training label; the loss is Σ λ_v L_v / Σ λ_v over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from saintpipe.core.subgraph import Subgraph
from saintpipe.core.tensors import as_tensor
from saintpipe.trainer.sparse import SparseOperand


def mean_aggregation_weights(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights of D⁻¹A (row v averages its neighbours) and of its transpose at the same positions.

    Returns:
        ``(w, w_t)`` float32 [e]: ``w[k] = 1/deg(v)`` for entry k in row v, and
        ``w_t[k] = 1/deg(u)`` for its column u (Aᵀ[v,u] = A[u,v]).
    """
    deg = np.diff(indptr).astype(np.float64)
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    w = np.repeat(inv, np.diff(indptr)).astype(np.float32)
    w_t = inv[np.asarray(indices, dtype=np.int64)].astype(np.float32)
    return w, w_t


@dataclass
class GraphBatch:
    """A graph (or subgraph) ready for a model.

    Attributes:
        adj: Ã as a :class:`~saintpipe.trainer.sparse.SparseOperand`.
        x: float [n, f] node features.
        labels: int64 [n] (single-label, -1 = none) or float [n, C] (multi-label).
        loss_weights: float [n], zero where a node has no training label.
        degrees: float [n] full-graph degrees.
        node_ids: int64 [n] global ids of the rows, when known.
    """

    adj: SparseOperand
    x: torch.Tensor
    labels: torch.Tensor
    loss_weights: torch.Tensor
    degrees: torch.Tensor
    node_ids: np.ndarray | None = None
    _adj_hat: SparseOperand | None = field(default=None, repr=False)

    @property
    def num_nodes(self) -> int:
        return self.adj.n

    @property
    def multilabel(self) -> bool:
        return self.labels.dim() == 2

    @property
    def adj_hat(self) -> SparseOperand:
        """Â: Ã with self-loops mixed in (GCN eq. 4, GAT, MixHop eq. 5)."""
        if self._adj_hat is None:
            self._adj_hat = self.adj.with_self_loops(self.degrees)
        return self._adj_hat

    @property
    def num_labelled(self) -> int:
        return int((self.loss_weights > 0).sum())


def _labels_tensor(labels: np.ndarray) -> torch.Tensor:
    return as_tensor(labels, np.float32 if labels.ndim == 2 else np.int64)


def batch_from_subgraph(
    sub: Subgraph,
    features: np.ndarray,
    labels: np.ndarray,
    train_mask: np.ndarray,
    degrees: np.ndarray,
    device: torch.device | str = "cpu",
) -> GraphBatch:
    """A training batch from a sampled subgraph.

    Args:
        sub: the subgraph (CSR, aggregator-normalized weights and their transpose, loss weights).
        features: float [n, f], the rows of ``sub.node_ids`` in that order.
        labels: all nodes' labels (int64 [N] or 0/1 [N, C]); indexed by ``sub.node_ids``.
        train_mask: bool [N]; only these nodes contribute to the loss.
        degrees: int [N] full-graph degrees.
    """
    ids = np.asarray(sub.node_ids, dtype=np.int64)
    if features.shape[0] != ids.size:
        raise ValueError(
            f"subgraph {sub.job_id}/{sub.worker}/{sub.sequence}: {features.shape[0]} feature rows "
            f"for {ids.size} nodes"
        )
    lw = np.asarray(sub.loss_weights, dtype=np.float32) * np.asarray(train_mask[ids], dtype=np.float32)
    adj = SparseOperand.from_csr(sub.indptr, sub.indices, sub.edge_weights, sub.edge_weights_t, device=device)
    return GraphBatch(
        adj=adj,
        x=as_tensor(features, np.float32).to(device),
        labels=_labels_tensor(np.asarray(labels[ids])).to(device),
        loss_weights=torch.from_numpy(lw).to(device),
        degrees=torch.from_numpy(np.asarray(degrees[ids], dtype=np.float32)).to(device),
        node_ids=ids,
    )


def full_graph_batch(
    indptr: np.ndarray,
    indices: np.ndarray,
    features: np.ndarray,
    labels: np.ndarray,
    train_mask: np.ndarray | None = None,
    device: torch.device | str = "cpu",
) -> GraphBatch:
    """The whole graph as one batch: Ã = D⁻¹A, every training node weighted equally."""
    n = indptr.size - 1
    w, w_t = mean_aggregation_weights(indptr, indices)
    mask = np.ones(n, dtype=bool) if train_mask is None else np.asarray(train_mask, dtype=bool)
    lw = mask.astype(np.float32) / max(1, int(mask.sum()))
    return GraphBatch(
        adj=SparseOperand.from_csr(indptr, indices, w, w_t, device=device),
        x=as_tensor(features, np.float32).to(device),
        labels=_labels_tensor(np.asarray(labels)).to(device),
        loss_weights=torch.from_numpy(lw).to(device),
        degrees=torch.from_numpy(np.diff(indptr).astype(np.float32)).to(device),
        node_ids=np.arange(n, dtype=np.int64),
    )
