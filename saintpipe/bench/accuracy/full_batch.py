"""The full-batch baseline of ``saintpipe bench accuracy``: Kipf and Welling's two-layer GCN and its recipe.

Z = softmax(Â · ReLU(Â · X · W0) · W1) (GCN paper, eq. 9), trained as in its reference code:
Glorot-initialised weights without bias, dropout 0.5 on the input features and on the hidden layer, Adam with
learning rate 0.01, L2 weight decay 5e-4 on the first layer only, 200 epochs of one full-graph step each,
row-normalised features. The model kept is the one with the best validation accuracy (ties: the lower
validation loss); its test accuracy is the score. This is the published baseline (81.5 on Cora, 70.3 on
CiteSeer), so a gap between it and the subgraph runs is sampling's, not a weak baseline's.

The trainer's GNN (``saintpipe.trainer.models``) cannot express it: its graph layers are followed by a dense
classifier, so two GCN layers there are three weight matrices; and its Â is the random-walk form (I+D)⁻¹(I+A),
where Kipf's is the symmetric D̃^-1/2 (A+I) D̃^-1/2. Both forms are here (``adjacency``) so the difference can
be measured (docs/benchmarks/accuracy.md).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from saintpipe.trainer.evaluate import EvalGraph

Adjacency = Literal["sym", "rw"]


@dataclass(frozen=True)
class KipfRecipe:
    """The GCN paper's hyper-parameters; each field can be varied to measure what it is worth.

    Attributes:
        hidden: width of the hidden layer.
        dropout: dropout rate on the input features and on the hidden layer.
        lr: Adam's learning rate.
        weight_decay: L2 coefficient (the gradient of ``weight_decay/2 * ||W||²``, as Kipf's ``tf.nn.l2_loss``).
        decay_all: decay both layers (Kipf's code decays the first only).
        epochs: full-graph steps.
        adjacency: ``sym`` D̃^-1/2 (A+I) D̃^-1/2 (Kipf), or ``rw`` (I+D)⁻¹(I+A) (the trainer's GCN layer).
    """

    hidden: int = 16
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    decay_all: bool = False
    epochs: int = 200
    adjacency: Adjacency = "sym"


def row_normalize(features: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (Kipf's ``preprocess_features``); rows summing to 0 stay 0.

    Args:
        features: float [N, F], non-negative (bag-of-words counts or 0/1).

    Returns:
        float32 [N, F], a new array.

    Example:
        >>> row_normalize(np.array([[1.0, 3.0], [0.0, 0.0]])).tolist()
        [[0.25, 0.75], [0.0, 0.0]]
    """
    x = np.asarray(features, dtype=np.float64)
    sums = x.sum(axis=1, keepdims=True)
    inv = np.divide(1.0, sums, out=np.zeros_like(sums), where=sums != 0)
    return (x * inv).astype(np.float32)


def gcn_adjacency(indptr: np.ndarray, indices: np.ndarray, form: Adjacency = "sym") -> torch.Tensor:
    """Â of the renormalisation trick as a coalesced sparse COO tensor [N, N], self-loops included.

    ``sym``: D̃^-1/2 (A+I) D̃^-1/2 with D̃ = D + I; ``rw``: D̃⁻¹ (A+I). The graph's
    own self-loops (if any) are kept as edges, on top of the added I, as in Kipf's code.
    """
    n = int(indptr.size - 1)
    degrees: np.ndarray = np.diff(np.asarray(indptr, dtype=np.int64))
    rows = np.repeat(np.arange(n, dtype=np.int64), degrees)
    rows = np.concatenate([rows, np.arange(n, dtype=np.int64)])
    cols = np.concatenate([np.asarray(indices, dtype=np.int64), np.arange(n, dtype=np.int64)])
    deg = np.bincount(rows, minlength=n).astype(np.float64)  # D̃: degree with the added self-loop
    if form == "sym":
        values = 1.0 / np.sqrt(deg[rows] * deg[cols])
    elif form == "rw":
        values = 1.0 / deg[rows]
    else:
        raise ValueError(f"adjacency form must be 'sym' or 'rw', got {form!r}")
    return _coo(rows, cols, values, (n, n))


def _coo(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> torch.Tensor:
    index = torch.from_numpy(np.vstack([rows, cols]).astype(np.int64))
    values_t = torch.from_numpy(values.astype(np.float32))
    return torch.sparse_coo_tensor(index, values_t, shape, check_invariants=True).coalesce()


def _glorot(rows: int, cols: int) -> nn.Parameter:
    bound = math.sqrt(6.0 / (rows + cols))
    return nn.Parameter(torch.empty(rows, cols).uniform_(-bound, bound))


class TwoLayerGCN(nn.Module):
    """Â · ReLU(Â · drop(X) · W0) → drop → Â · H · W1: logits [N, C] (no bias, as in Kipf's code).

    X is sparse (bag-of-words rows: about 1 % non-zeros on Cora) and dropout
    acts on its stored values, as Kipf's sparse dropout does: the first product
    costs non-zeros × hidden instead of N × F × hidden, about 13 times less time on Cora.
    """

    def __init__(self, in_dim: int, hidden: int, num_classes: int, dropout: float) -> None:
        super().__init__()
        self.w0 = _glorot(in_dim, hidden)
        self.w1 = _glorot(hidden, num_classes)
        self.dropout = nn.Dropout(dropout)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits [N, C] for the sparse COO features ``x`` [N, F] and Â ``adj`` [N, N]."""
        # The same (checked, coalesced) pattern as x: no need to check it again every step.
        x = torch.sparse_coo_tensor(x.indices(), self.dropout(x.values()), x.shape, is_coalesced=True,
                                    check_invariants=False)
        h = torch.relu(torch.sparse.mm(adj, torch.sparse.mm(x, self.w0)))
        return torch.sparse.mm(adj, self.dropout(h) @ self.w1)


def train_kipf_gcn(graph: EvalGraph, seed: int, recipe: KipfRecipe = KipfRecipe()) -> dict:
    """Train the two-layer GCN full-batch on ``graph`` (single-label) with ``recipe``.

    The features are used as ``graph`` gives them: row-normalise them first
    (:func:`row_normalize`, as :func:`saintpipe.bench.accuracy.experiment.load_planetoid` does).

    Returns:
        ``{"val", "test", "best_epoch", "epochs"}``: accuracies of the weights with the best validation
        accuracy (ties: lower validation loss), and the epoch (1-based) they come from.
    """
    if graph.multilabel:
        raise ValueError("the Kipf GCN baseline is single-label (softmax); this graph is multi-label")
    torch.manual_seed(seed)
    dense = np.asarray(graph.gather(np.arange(graph.num_nodes, dtype=np.int64)), dtype=np.float32)
    rows, cols = np.nonzero(dense)
    x = _coo(rows, cols, dense[rows, cols], dense.shape)
    adj = gcn_adjacency(np.asarray(graph.indptr), np.asarray(graph.indices), recipe.adjacency)
    labels = torch.from_numpy(np.asarray(graph.labels, dtype=np.int64))
    split = {k: torch.from_numpy(np.array(graph.splits[k], dtype=np.int64)) for k in ("train", "val", "test")}
    model = TwoLayerGCN(graph.feature_dim, recipe.hidden, graph.num_classes, recipe.dropout)
    decayed = [model.w0, model.w1] if recipe.decay_all else [model.w0]
    rest = [] if recipe.decay_all else [model.w1]
    optimizer = torch.optim.Adam(
        [{"params": decayed, "weight_decay": recipe.weight_decay}, {"params": rest, "weight_decay": 0.0}],
        lr=recipe.lr,
    )
    loss_fn = nn.functional.cross_entropy
    best = (-1.0, math.inf)  # (validation accuracy, validation loss) of the kept weights
    best_state, best_epoch = None, 0
    for epoch in range(1, recipe.epochs + 1):
        model.train()
        optimizer.zero_grad()
        loss = loss_fn(model(adj, x)[split["train"]], labels[split["train"]])
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            logits = model(adj, x)
            val_acc = _accuracy(logits, labels, split["val"])
            val_loss = float(loss_fn(logits[split["val"]], labels[split["val"]]))
        if val_acc > best[0] or (val_acc == best[0] and val_loss < best[1]):
            best, best_epoch = (val_acc, val_loss), epoch
            best_state = copy.deepcopy(model.state_dict())
    if best_state is None:  # the first epoch's score is the best so far (what loading None raised before)
        raise TypeError("training kept no weights")
    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        logits = model(adj, x)
    return {
        "val": _accuracy(logits, labels, split["val"]),
        "test": _accuracy(logits, labels, split["test"]),
        "best_epoch": best_epoch,
        "epochs": recipe.epochs,
    }


def _accuracy(logits: torch.Tensor, labels: torch.Tensor, ids: torch.Tensor) -> float:
    return int((logits[ids].argmax(1) == labels[ids]).sum()) / max(1, ids.numel())  # exact, not float32
