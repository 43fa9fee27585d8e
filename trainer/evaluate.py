"""Validation and test scores on the full graph: accuracy, or F1-micro for multi-label data.

Evaluation runs the trained model on the whole graph with Ã = D⁻¹A (no sampling, so no sampling
normalization). When the graph's features and activations fit the configured memory bound it is one forward
pass; otherwise it goes layer by layer (:mod:`saintpipe.trainer.inference`): layer ℓ's output is computed for
a block of rows from their one-hop neighbours' rows of layer ℓ-1's stored output, never from an induced k-hop
neighbourhood. The same layer code runs in both modes. An :class:`~saintpipe.trainer.eval_watch.EvalWatch`
shows another thread how far it is and cuts it at a deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from saintpipe.trainer.batch import GraphBatch, full_graph_batch
from saintpipe.trainer.eval_watch import EvalWatch
from saintpipe.trainer.layers import MixHopLayer
from saintpipe.trainer.models import GNN


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
    watch: EvalWatch | None = None,
) -> torch.Tensor:
    """Logits [N, C] of every node, in one pass when it fits in ``max_full_bytes``, else layer by layer
    (:class:`~saintpipe.trainer.inference.LayerwiseInference`, ``batch_nodes`` rows per block).

    Raises:
        EvaluationCancelled: ``watch`` cut it (its deadline, or a cancel).
    """
    if not one_pass(graph, model, max_full_bytes):
        from saintpipe.trainer.inference import LayerwiseInference

        # Two layer outputs are held at a time: past half the bound, each goes to a memory-mapped file.
        limits = layerwise_limits(batch_nodes, max_full_bytes)
        return torch.from_numpy(LayerwiseInference(model, graph, limits, device=device, progress=progress,
                                                   watch=watch).logits())
    was_training = model.training
    model.eval()
    completed = False
    try:
        if watch is not None:
            watch.begin(1)
            watch.next_pass("one pass")
        logits = model(graph.full_batch(device)).cpu()
        completed = True
        return logits
    finally:
        if watch is not None:
            watch.end(completed)
        model.train(was_training)


def one_pass(graph: EvalGraph, model: GNN, max_full_bytes: int) -> bool:
    """Whether :func:`predict` scores ``graph`` in one forward pass (else layer by layer)."""
    return estimate_full_bytes(graph, model) <= max_full_bytes


def layerwise_limits(batch_nodes: int, max_full_bytes: int):
    """The :class:`~saintpipe.trainer.inference.InferenceLimits` :func:`predict` goes layer by layer with."""
    from saintpipe.trainer.inference import InferenceLimits

    return InferenceLimits(block_rows=batch_nodes, spill_bytes=max_full_bytes // 2)


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
