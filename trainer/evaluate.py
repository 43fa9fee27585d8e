"""Validation and test scores on the full graph: accuracy, or F1-micro for multi-label data.

Evaluation runs the trained model on the whole graph with Ã = D⁻¹A (no
sampling, so no sampling normalization). When the graph's features and
activations fit the configured memory bound it is one forward pass; otherwise
it goes layer by layer: layer ℓ's output is computed for a batch B of nodes on
the subgraph induced by B's k-hop neighbourhood (k = the layer's reach: 1, or
the largest MixHop power), which makes B's rows exact, and the next layer reads
the stored outputs. The same layer code runs in both modes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from saintpipe.trainer.batch import GraphBatch, full_graph_batch
from saintpipe.trainer.induce import induce, k_hop_nodes
from saintpipe.trainer.layers import MixHopLayer
from saintpipe.trainer.models import GNN
from saintpipe.trainer.sparse import SparseOperand, as_tensor

log = logging.getLogger(__name__)


@dataclass
class EvalGraph:
    """The full graph a model is scored on.

    Attributes:
        indptr, indices: CSR topology (may be memory maps).
        labels: int64 [N] (-1 = none) or 0/1 [N, C].
        gather: returns feature rows for an id array, in order.
        feature_dim: columns of the features.
        splits: node id arrays by split name (train, val, test).
    """

    indptr: np.ndarray
    indices: np.ndarray
    labels: np.ndarray
    gather: Callable[[np.ndarray], np.ndarray]
    feature_dim: int
    splits: dict[str, np.ndarray]
    _full: GraphBatch | None = field(default=None, repr=False)
    _degrees: np.ndarray | None = field(default=None, repr=False)

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.size)

    @property
    def multilabel(self) -> bool:
        return self.labels.ndim == 2

    @property
    def num_classes(self) -> int:
        return int(self.labels.shape[1]) if self.multilabel else int(self.labels.max()) + 1

    @property
    def degrees(self) -> np.ndarray:
        if self._degrees is None:
            self._degrees = np.diff(np.asarray(self.indptr)).astype(np.int64)
        return self._degrees

    def train_mask(self) -> np.ndarray:
        mask = np.zeros(self.num_nodes, dtype=bool)
        mask[self.splits["train"]] = True
        return mask

    @classmethod
    def from_arrays(
        cls,
        indptr: np.ndarray,
        indices: np.ndarray,
        features: np.ndarray,
        labels: np.ndarray,
        splits: dict[str, np.ndarray],
    ) -> EvalGraph:
        return cls(
            indptr=indptr,
            indices=indices,
            labels=labels,
            gather=lambda ids: features[ids],
            feature_dim=int(features.shape[1]),
            splits=splits,
        )

    @classmethod
    def from_dataset(cls, dataset) -> EvalGraph:
        """From an opened :class:`saintpipe.services.dataset.store.Dataset` (features read from its shards)."""
        return cls(
            indptr=dataset.indptr,
            indices=dataset.indices,
            labels=dataset.labels,
            gather=dataset.gather_features,
            feature_dim=dataset.manifest.feature_dim,
            splits=dict(dataset.splits),
        )

    def full_batch(self, device: torch.device | str = "cpu") -> GraphBatch:
        if self._full is None:
            feats = self.gather(np.arange(self.num_nodes, dtype=np.int64))
            self._full = full_graph_batch(
                np.asarray(self.indptr),
                np.asarray(self.indices),
                feats,
                np.asarray(self.labels),
                self.train_mask(),
                device=device,
            )
        return self._full


def estimate_full_bytes(graph: EvalGraph, model: GNN) -> int:
    """Rough memory of one full-graph forward pass: features, activations and the CSR."""
    widths = [graph.feature_dim, *model.config.hidden, model.num_classes]
    reach = max((max(layer.powers) for layer in model.layers if isinstance(layer, MixHopLayer)), default=1)
    per_node = 4 * (sum(widths) * (1 + reach))
    heads = model.config.heads if model.config.arch == "gat" else 0
    per_edge = 4 * 3 + 4 * 3 * heads
    return graph.num_nodes * per_node + graph.num_edges * per_edge


def score(logits: torch.Tensor, labels: np.ndarray, multilabel: bool) -> float:
    """Accuracy (single-label, ignoring label -1) or F1-micro (multi-label, sigmoid > 0.5)."""
    logits = logits.detach().cpu()
    if multilabel:
        pred = (logits > 0).numpy()
        truth = np.asarray(labels).astype(bool)
        tp = np.logical_and(pred, truth).sum()
        fp = np.logical_and(pred, ~truth).sum()
        fn = np.logical_and(~pred, truth).sum()
        return float(2 * tp / max(1, 2 * tp + fp + fn))
    labels = np.asarray(labels)
    keep = labels >= 0
    if not keep.any():
        return float("nan")
    return float((logits.argmax(1).numpy()[keep] == labels[keep]).mean())


@torch.no_grad()
def predict(
    model: GNN,
    graph: EvalGraph,
    *,
    max_full_bytes: int = 2 << 30,
    batch_nodes: int = 65_536,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> torch.Tensor:
    """Logits [N, C] of every node, in one pass when it fits in ``max_full_bytes``, else layer by layer."""
    was_training = model.training
    model.eval()
    try:
        if estimate_full_bytes(graph, model) <= max_full_bytes:
            return model(graph.full_batch(device)).cpu()
        return _predict_layerwise(model, graph, batch_nodes, device, progress)
    finally:
        model.train(was_training)


def _block(graph: EvalGraph, nodes: np.ndarray, scratch: np.ndarray, device) -> SparseOperand:
    """Ã = D⁻¹A (full-graph degrees) restricted to ``nodes``; exact on rows whose neighbours are all in."""
    sub_indptr, sub_indices = induce(graph.indptr, graph.indices, nodes, scratch)
    deg = graph.degrees[nodes].astype(np.float64)
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    w = np.repeat(inv, np.diff(sub_indptr)).astype(np.float32)
    w_t = inv[sub_indices].astype(np.float32)
    return SparseOperand.from_csr(sub_indptr, sub_indices, w, w_t, device=device)


def _neighbourhood(
    graph: EvalGraph, out_nodes: np.ndarray, reach: int, scratch: np.ndarray, h_prev: np.ndarray | None, device
) -> tuple[GraphBatch, torch.Tensor]:
    """The batch of ``out_nodes``' ``reach``-hop neighbourhood (inputs: features, or ``h_prev``'s rows), and
    the positions of ``out_nodes`` in it."""
    nodes = k_hop_nodes(np.asarray(graph.indptr), np.asarray(graph.indices), out_nodes, reach, scratch)
    x = graph.gather(nodes) if h_prev is None else h_prev[nodes]
    batch = GraphBatch(
        adj=_block(graph, nodes, scratch, device),
        x=as_tensor(x, np.float32).to(device),
        labels=torch.zeros(0),
        loss_weights=torch.zeros(0),
        degrees=torch.from_numpy(graph.degrees[nodes].astype(np.float32)).to(device),
    )
    return batch, torch.from_numpy(np.searchsorted(nodes, out_nodes)).to(device)


def _predict_layerwise(
    model: GNN, graph: EvalGraph, batch_nodes: int, device, progress: bool
) -> torch.Tensor:
    n = graph.num_nodes
    scratch = np.full(n, -1, dtype=np.int32)
    h_prev: np.ndarray | None = None
    for layer in model.layers:
        reach = max(layer.powers) if isinstance(layer, MixHopLayer) else 1
        h_next = np.empty((n, layer.f_out), dtype=np.float32)
        starts = range(0, n, batch_nodes)
        for start in tqdm(starts, desc=f"eval {layer.name}", disable=not progress, leave=False):
            out_nodes = np.arange(start, min(n, start + batch_nodes), dtype=np.int64)
            batch, rows = _neighbourhood(graph, out_nodes, reach, scratch, h_prev, device)
            h = model.act(layer(batch.x, batch, model.scheduler))[rows]
            h_next[start : start + out_nodes.size] = h.cpu().numpy()
        h_prev = h_next
        log.debug("layer-wise evaluation: %s done", layer.name)
    if model.config.classifier == "graph":  # the classifier propagates too: one more hop
        logits = []
        for start in range(0, n, batch_nodes):
            out_nodes = np.arange(start, min(n, start + batch_nodes), dtype=np.int64)
            batch, rows = _neighbourhood(graph, out_nodes, 1, scratch, h_prev, device)
            logits.append(model.classify(batch.x, batch)[rows].cpu())
        return torch.cat(logits)
    logits = [
        model.classify(torch.from_numpy(h_prev[s : s + batch_nodes]).to(device)).cpu()
        for s in range(0, n, batch_nodes)
    ]
    return torch.cat(logits)


def evaluate(
    model: GNN, graph: EvalGraph, splits: tuple[str, ...] = ("val", "test"), **kwargs
) -> dict[str, float]:
    """Scores of ``model`` on each named split (accuracy, or F1-micro for multi-label data).

    Keyword arguments go to :func:`predict`.

    Example:
        >>> scores = evaluate(model, graph)          # doctest: +SKIP
        >>> scores["val"], scores["test"]            # doctest: +SKIP
        (0.79, 0.812)
    """
    logits = predict(model, graph, **kwargs)
    labels = np.asarray(graph.labels)
    out = {}
    for name in splits:
        ids = np.array(graph.splits[name], dtype=np.int64)  # a writable copy: splits may be read-only maps
        out[name] = score(logits[torch.from_numpy(ids)], labels[ids], graph.multilabel)
    return out
