"""One GraphSAINT minibatch as tensors: what a training step outside the pipeline's trainer needs.

It belongs to the minibatch path, beneath the models: it knows the GraphSAINT
loss and nothing of the trainer's own batch type (the loader's
:class:`saintpipe.loader.minibatch.Minibatch` adds the conversion to it).

A :class:`Minibatch` holds one sampled subgraph of ``n`` nodes and ``e``
adjacency entries (both directions of every undirected edge):

* ``node_ids`` int64 [n]: the global id of each row, sorted ascending.
* ``x`` float32 [n, F]: the nodes' features (the dataset's rows of ``node_ids``).
* ``edge_index`` int64 [2, e]: PyG's convention, message from ``edge_index[0]``
  (the neighbour u) to ``edge_index[1]`` (the aggregating node v), local ids,
  sorted by v. ``indptr`` int64 [n+1] is the same as CSR over v
  (``edge_index[0]`` is its column array).
* ``edge_weight`` float32 [e]: the aggregator weight of each entry, the
  GraphSAINT normalization already in it: ``h_v = Σ_u edge_weight · x_u``
  estimates the full graph's mean aggregation (``1/deg(v) / α(u,v)``; plain
  ``1/deg_subgraph(v)`` without a normalization). Sum-aggregate with it, do
  not renormalize.
* ``edge_weight_t`` float32 [e]: the transposed matrix's weight at the same
  position (Algorithm 6), for a hand-written backward pass; autograd users
  ignore it.
* ``y``: int64 [n] labels (-1: none), or float32 [n, C] 0/1 for multi-label data.
* ``loss_weight`` float32 [n]: λ_v, the loss normalization, zero for nodes
  that carry no loss. The GraphSAINT loss is ``Σ_v λ_v ℓ_v / Σ_v λ_v``
  (:meth:`Minibatch.loss`).
* ``train_mask`` bool [n]: the training nodes (``loss_weight > 0`` lies within it).
* ``degree`` float32 [n]: each node's degree in the graph the samplers draw
  from: the full graph, or the training graph with ``[samplers] graph =
  "train"`` (GCN's self-loop mix, as a trainer's batch has it:
  :meth:`saintpipe.trainer.sparse.SparseOperand.with_self_loops`).
* ``entry_id``, ``deliveries``, ``step``, ``epoch``: where it came from in the
  pool (``deliveries > 1``: delivered again after a consumer failed to
  acknowledge it), its 0-based index in this iteration, and the 0-based epoch it
  belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from saintpipe.core.subgraph import Subgraph
from saintpipe.core.tensors import as_tensor, weighted_loss

_TENSORS = ("node_ids", "x", "edge_index", "indptr", "edge_weight", "edge_weight_t", "y", "loss_weight",
            "train_mask", "degree")


@dataclass
class Minibatch:
    """One sampled subgraph with its features, labels and weights (the module docstring lists each field)."""

    node_ids: torch.Tensor
    x: torch.Tensor
    edge_index: torch.Tensor
    indptr: torch.Tensor
    edge_weight: torch.Tensor
    edge_weight_t: torch.Tensor
    y: torch.Tensor
    loss_weight: torch.Tensor
    train_mask: torch.Tensor
    degree: torch.Tensor
    entry_id: str = ""
    deliveries: int = 1
    step: int = 0
    epoch: int = 0

    @property
    def num_nodes(self) -> int:
        return int(self.node_ids.numel())

    @property
    def num_edges(self) -> int:
        """Adjacency entries (each undirected edge counts twice)."""
        return int(self.edge_index.shape[1])

    @property
    def multilabel(self) -> bool:
        return self.y.dim() == 2

    @property
    def num_labelled(self) -> int:
        """Nodes that carry loss."""
        return int((self.loss_weight > 0).sum())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Minibatch:
        """A copy with every tensor on ``device``."""
        return replace(self, **{name: getattr(self, name).to(device, non_blocking=non_blocking) for name in _TENSORS})

    def pin_memory(self) -> Minibatch:
        """A copy in pinned memory (``DataLoader(pin_memory=True)`` calls it)."""
        return replace(self, **{name: getattr(self, name).pin_memory() for name in _TENSORS})

    def loss(self, logits: torch.Tensor) -> torch.Tensor:
        """The GraphSAINT loss ``Σ λ_v ℓ_v / Σ λ_v``: cross-entropy, or mean-over-classes BCE for multi-label data.

        Args:
            logits: float [n, C], one row per node of this minibatch.
        """
        return weighted_loss(logits, self.y, self.loss_weight, self.multilabel)

    def __repr__(self) -> str:
        meta = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name not in _TENSORS)
        return f"Minibatch(nodes={self.num_nodes}, edges={self.num_edges}, features={self.x.shape[1]}, {meta})"


def build_minibatch(sub: Subgraph, features: np.ndarray, labels: np.ndarray, train_mask: np.ndarray,
                    degrees: np.ndarray, *, entry_id: str = "", deliveries: int = 1, step: int = 0,
                    epoch: int = 0, kind: type[Minibatch] | None = None) -> Minibatch:
    """The minibatch of a subgraph from the pool, as a trainer builds its batch (:mod:`saintpipe.trainer.batch`).

    Args:
        sub: the subgraph (global ids, CSR, aggregator weights and their transpose, loss coefficients).
        features: float [n, F], the rows of ``sub.node_ids`` in that order.
        labels: every node's labels (int64 [N] or 0/1 [N, C]).
        train_mask: bool [N], the training nodes; only they carry loss.
        degrees: int [N] degrees in the graph the samplers draw from (the trainer's ``sampled_degrees``).
        kind: the class to build (the loader's :class:`saintpipe.loader.minibatch.Minibatch` adds
            ``graph_batch()``); default :class:`Minibatch`.

    Raises:
        ValueError: the features do not match the subgraph, or an id lies outside the labels' graph.
    """
    ids = np.asarray(sub.node_ids, dtype=np.int64)
    if features.shape[0] != ids.size:
        raise ValueError(f"subgraph {sub.job_id}/{sub.worker}/{sub.sequence}: {features.shape[0]} feature rows "
                         f"for {ids.size} nodes")
    if ids.size and not 0 <= ids[0] <= ids[-1] < labels.shape[0]:
        raise ValueError(f"subgraph {sub.job_id}/{sub.worker}/{sub.sequence}: node ids up to {int(ids[-1])} on a "
                         f"dataset of {labels.shape[0]} nodes: the loader's dataset is not the samplers'")
    indptr = np.asarray(sub.indptr, dtype=np.int64)
    rows = np.repeat(np.arange(ids.size, dtype=np.int64), np.diff(indptr))
    in_train = np.asarray(train_mask[ids], dtype=bool)
    # The trainer's rule (batch_from_subgraph): whatever the sampler weighted, only training nodes carry loss.
    loss = np.asarray(sub.loss_weights, dtype=np.float32) * in_train
    y = np.asarray(labels[ids])
    return (kind or Minibatch)(
        node_ids=as_tensor(ids, np.int64), x=as_tensor(features, np.float32),
        edge_index=torch.from_numpy(np.stack([np.asarray(sub.indices, dtype=np.int64), rows])),
        indptr=as_tensor(indptr, np.int64), edge_weight=as_tensor(sub.edge_weights, np.float32),
        edge_weight_t=as_tensor(sub.edge_weights_t, np.float32),
        y=as_tensor(y, np.float32 if y.ndim == 2 else np.int64), loss_weight=torch.from_numpy(loss),
        train_mask=torch.from_numpy(in_train),
        degree=torch.from_numpy(np.asarray(degrees[ids], dtype=np.float32)),
        entry_id=entry_id, deliveries=deliveries, step=step, epoch=epoch,
    )
