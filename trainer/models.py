"""The GNN: graph layers followed by the classifier of eq. 2, and its loss.

:func:`build_model` makes a :class:`GNN` from a :class:`~saintpipe.trainer.config.ModelConfig`.
The classifier is X_MLP = act(X⁽ᴸ⁾·W_MLP) (eq. 2); the loss is softmax with
cross-entropy for single-label data and sigmoid with binary cross-entropy for
multi-label data, each node weighted by its loss-normalization coefficient.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from saintpipe.core.tensors import weighted_loss
from saintpipe.trainer.batch import GraphBatch
from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.dropout import Dropout
from saintpipe.trainer.layers import GATLayer, GCNLayer, GraphLayer, MixHopLayer, SAGELayer, _glorot
from saintpipe.trainer.ops import dense, spmm
from saintpipe.trainer.schedule import Scheduler

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": nn.functional.relu, "leaky_relu": nn.functional.leaky_relu, "elu": nn.functional.elu,
    "tanh": torch.tanh, "identity": lambda t: t,
}


def _make_layer(config: ModelConfig, name: str, f_in: int, f_out: int) -> GraphLayer:
    if config.arch == "gcn":
        return GCNLayer(name, f_in, f_out, bias=config.bias)
    if config.arch == "sage":
        return SAGELayer(name, f_in, f_out, bias=config.bias)
    if config.arch == "gat":
        return GATLayer(name, f_in, f_out, config.heads, config.negative_slope, bias=config.bias)
    return MixHopLayer(name, f_in, f_out, config.mixhop_powers, bias=config.bias)


class GNN(nn.Module):
    """Graph layers, each followed by the activation, then the classifier.

    Attributes:
        scheduler: picks the matmul order of every layer (section 6.1).
    """

    def __init__(self, config: ModelConfig, in_dim: int, num_classes: int, multilabel: bool) -> None:
        super().__init__()
        self.config, self.in_dim, self.num_classes, self.multilabel = config, in_dim, num_classes, multilabel
        widths = [in_dim, *config.hidden]
        self.layers = nn.ModuleList(
            _make_layer(config, f"layer{i + 1}", widths[i], widths[i + 1]) for i in range(len(config.hidden))
        )
        self.classifier = _glorot(widths[-1], num_classes)
        self.classifier_bias = nn.Parameter(torch.zeros(num_classes)) if config.bias else None
        self.dropout = Dropout(config.dropout)
        self.act = _ACTIVATIONS[config.activation]
        self.classifier_act = _ACTIVATIONS[config.classifier_activation]
        self.scheduler = Scheduler(config.order)

    def embed(
        self, batch: GraphBatch, x: torch.Tensor | None = None, upto: int | None = None
    ) -> torch.Tensor:
        """Outputs of the first ``upto`` graph layers (all by default) on ``batch``."""
        h = batch.x if x is None else x
        for layer in list(self.layers)[:upto]:
            h = self.act(layer(self.dropout(h), batch, self.scheduler))
        return h

    def classify(self, h: torch.Tensor, batch: GraphBatch | None = None) -> torch.Tensor:
        """Eq. 2 without σ: the classifier's logits from the last layer's output.

        With ``classifier: graph`` the product is propagated over ``batch``'s Â (the graph of ``h``'s rows):
        Â·(H·W), the cheap order, as the classes are fewer than the hidden width.
        """
        logits = dense(self.dropout(h), self.classifier)
        if self.config.classifier == "graph":
            if batch is None:
                raise ValueError("a graph classifier needs the batch of its input rows")
            logits = spmm(batch.adj_hat, logits)
        if self.classifier_bias is not None:
            logits = logits + self.classifier_bias
        return self.classifier_act(logits)

    def forward(self, batch: GraphBatch) -> torch.Tensor:
        """Logits [n, C] for every node of ``batch``."""
        return self.classify(self.embed(batch), batch)

    def loss(self, logits: torch.Tensor, batch: GraphBatch) -> torch.Tensor:
        """Σ_v λ_v·L_v / Σ_v λ_v with λ the batch's loss weights (zero for unlabelled nodes)."""
        return weighted_loss(logits, batch.labels, batch.loss_weights, self.multilabel)


def build_model(config: ModelConfig, in_dim: int, num_classes: int, multilabel: bool) -> GNN:
    """Make the GNN of ``config`` for ``in_dim`` input features and ``num_classes`` outputs.

    Example:
        >>> from saintpipe.trainer.config import ModelConfig
        >>> config = ModelConfig(arch="gcn", hidden=[16])
        >>> model = build_model(config, in_dim=500, num_classes=3, multilabel=False)
        >>> sum(p.numel() for p in model.parameters())
        8067
    """
    if in_dim < 1 or num_classes < 1:
        raise ValueError(f"in_dim ({in_dim}) and num_classes ({num_classes}) must be >= 1")
    return GNN(config, in_dim, num_classes, multilabel)
