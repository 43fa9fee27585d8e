"""The loader's minibatch: the minibatch path's :class:`~saintpipe.minibatch.batch.Minibatch`, plus the
conversion to the batch type of the project's own models.

The fields, the loss and the transfers are the minibatch path's (its module
docstring lists each field); this class only adds :meth:`Minibatch.graph_batch`,
which the minibatch path, beneath the models, cannot offer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
import torch

from saintpipe.core.subgraph import Subgraph
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


def build_minibatch(sub: Subgraph, features: np.ndarray, labels: np.ndarray, train_mask: np.ndarray,
                    degrees: np.ndarray, *, entry_id: str = "", deliveries: int = 1, step: int = 0,
                    epoch: int = 0) -> Minibatch:
    """:func:`saintpipe.minibatch.batch.build_minibatch` (same arguments), building the loader's :class:`Minibatch`."""
    # kind=Minibatch: the built object is this module's Minibatch (batch.build_minibatch returns its base).
    return cast(Minibatch, batch.build_minibatch(sub, features, labels, train_mask, degrees, entry_id=entry_id,
                                                 deliveries=deliveries, step=step, epoch=epoch, kind=Minibatch))
