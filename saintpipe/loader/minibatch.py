"""The loader's minibatch: the minibatch path's :class:`~saintpipe.minibatch.batch.Minibatch`, plus the
conversion to the batch type of the project's own models.

The fields, the loss and the transfers are the minibatch path's (its module docstring lists each field); this
class only adds :meth:`Minibatch.graph_batch`, which the minibatch path, beneath the models, cannot offer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from saintpipe.minibatch import batch

if TYPE_CHECKING:
    from saintpipe.trainer.batch import GraphBatch


class Minibatch(batch.Minibatch):
    """One sampled subgraph with its features, labels and weights (see :class:`saintpipe.minibatch.batch.Minibatch`)."""

    def graph_batch(self, device: torch.device | str | None = None) -> GraphBatch:
        """This minibatch as the :class:`~saintpipe.trainer.batch.GraphBatch` the project's own models read
        (:func:`saintpipe.trainer.models.build_model`)."""
        from saintpipe.trainer.batch import GraphBatch
        from saintpipe.trainer.sparse import SparseOperand

        device = device or self.x.device
        indices = self.edge_index[0].to(torch.int32)
        adj = SparseOperand.from_csr(self.indptr.cpu().numpy(), indices.cpu().numpy(), self.edge_weight.cpu().numpy(),
                                     self.edge_weight_t.cpu().numpy(), device=device)
        return GraphBatch(adj=adj, x=self.x.to(device), labels=self.y.to(device),
                          loss_weights=self.loss_weight.to(device), degrees=self.degree.to(device),
                          node_ids=self.node_ids.cpu().numpy())

