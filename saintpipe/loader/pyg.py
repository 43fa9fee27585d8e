"""A :class:`~saintpipe.loader.minibatch.Minibatch` as a ``torch_geometric.data.Data`` (PyG, an optional extra).

Attributes of the ``Data``:

* ``x``, ``y``, ``edge_index``: as in the minibatch (message from ``edge_index[0]`` to ``edge_index[1]``).
* ``edge_weight``: the GraphSAINT aggregator weights (normalization included): use them with a
  sum aggregation that does not renormalize, e.g. ``GCNConv(..., normalize=False)`` or ``GraphConv``
  (PyG's own GraphSAINT example multiplies its ``edge_norm`` into such a weight the same way).
  With ``self_loops=True`` they are the weights of Â = diag(1/(1+d)) + diag(d/(1+d))·Ã, the project's
  GCN renormalization with the degree d of ``batch.degree``, with one self-loop per node appended.
* ``node_norm``: the loss weights λ (PyG's GraphSAINT name); the loss is
  ``(node_norm * ℓ).sum() / node_norm.sum()``.
* ``train_mask``: the training nodes (``node_norm > 0`` lies within it).
* ``n_id``: the global node ids (PyG's name in its other loaders); ``deg``: ``batch.degree``.
"""

from __future__ import annotations

from typing import Any

import torch

from saintpipe.loader.minibatch import Minibatch

EXTRA_HINT = "pip install 'saintpipe[pyg]' (or torch_geometric>=2.5)"


def to_pyg(batch: Minibatch, self_loops: bool = False) -> Any:  # a torch_geometric.data.Data
    """The minibatch as a ``torch_geometric.data.Data`` (same tensors, no copy unless ``self_loops``).

    Args:
        batch: a minibatch from :class:`~saintpipe.loader.stream.SubgraphLoader`.
        self_loops: append a self-loop per node and mix the weights as the project's GCN does (see the
            module docstring); for layers that add no self-loop of their own.

    Raises:
        ImportError: PyTorch Geometric is not installed (the message names the extra).
    """
    try:
        from torch_geometric.data import Data
    except ImportError as exc:
        raise ImportError(f"saintpipe.loader.to_pyg needs PyTorch Geometric: {EXTRA_HINT} ({exc})") from None
    edge_index, edge_weight = batch.edge_index, batch.edge_weight
    if self_loops:
        edge_index, edge_weight = with_self_loops(batch)
    return Data(x=batch.x, edge_index=edge_index, edge_weight=edge_weight, y=batch.y, node_norm=batch.loss_weight,
                train_mask=batch.train_mask, n_id=batch.node_ids, deg=batch.degree, num_nodes=batch.num_nodes)


def with_self_loops(batch: Minibatch) -> tuple[torch.Tensor, torch.Tensor]:
    """``(edge_index, edge_weight)`` of Â: entries scaled by d_v/(1+d_v), then a self-loop of weight 1/(1+d_v).

    d is ``batch.degree`` (the sampled graph's), as in :meth:`saintpipe.trainer.sparse.SparseOperand.with_self_loops`.
    """
    d = batch.degree
    target = batch.edge_index[1]
    weight = batch.edge_weight * (d / (1.0 + d))[target]
    loops = torch.arange(batch.num_nodes, dtype=batch.edge_index.dtype, device=batch.edge_index.device)
    edge_index = torch.cat([batch.edge_index, torch.stack([loops, loops])], dim=1)
    return edge_index, torch.cat([weight, 1.0 / (1.0 + d)])
