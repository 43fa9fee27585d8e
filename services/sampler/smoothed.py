"""The smoothed normalization estimator: pre-sampled or online counts shrunk toward a prior.

GraphSAINT estimates ``p_v`` and ``alpha(u, v)`` by the counts' ratios and patches what was never seen
with floors (alpha = 1e-4, a count of 0.1), which makes rare edge weights of ``1e4 / deg`` and loss
weights of ten times the usual: loss spikes. Here each probability is the posterior mean under a Beta
prior centred on the closed-form or approximate inclusion probability
(:mod:`saintpipe.services.sampler.inclusion`): consistent, never an outlier, and the prior exactly with
no count (:func:`smoothed_coefficients` gives the formulas).

Kept apart from :mod:`saintpipe.services.sampler.normalization` (which re-exports it), because that
module builds samplers and the samplers' online mode calls this estimator: this module depends on no
sampler.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from saintpipe.core.errors import InvalidArgument

__all__ = ["DEFAULT_STRENGTH", "smoothed_coefficients"]

# The prior's weight in pseudo-subgraphs (smoothed_coefficients' m). Measured on the demo dataset against
# 10^5 (random walk, 1000 roots) and 3 * 10^4 (frontier, m=1000 n=8000) pre-sampled subgraphs, for estimates
# from 20 to 2000 subgraphs and m in 10..100 (docs/explanation/trainer.md, "Normalization"): a larger m
# helps the random-walk prior (3 % off), while the frontier prior's alpha (10 % off) wants m <= 30; m = 30 keeps the
# mean aggregation-row bias under 9 % and the mean loss-weight bias under 24 % for both at every count.
DEFAULT_STRENGTH = 30.0


@njit(cache=True, nogil=True)
def _smoothed_kernel(indptr, node_counts, edge_counts, num_subgraphs, prior_p, prior_alpha, mask, num_train,
                     strength, loss_out, alpha_out):
    """Posterior means into ``loss_out`` and ``alpha_out``, each element written once with its final value.

    Samplers may read the outputs while this runs (online mode), so nothing
    provisional is ever stored in them. Empty count arrays stand for zero counts.
    """
    with_counts = node_counts.size > 0
    for v in range(indptr.size - 1):
        c_v = np.float64(node_counts[v]) if with_counts else 0.0
        p = min(1.0, (c_v + strength * prior_p[v]) / (num_subgraphs + strength))
        if p > 0.0 and num_train > 0 and (mask.size == 0 or mask[v] != 0):
            loss_out[v] = np.float32(1.0 / (p * num_train))
        else:
            loss_out[v] = np.float32(0.0)
        row = c_v + strength
        for k in range(indptr[v], indptr[v + 1]):
            c_uv = np.float64(edge_counts[k]) if with_counts else 0.0
            alpha_out[k] = np.float32(min(1.0, (c_uv + strength * prior_alpha[k]) / row))


def _train_mask(train_nodes: np.ndarray, num_nodes: int) -> np.ndarray:
    """uint8 [N], 1 on the training nodes (``sampler.train_mask``'s checks, without importing the samplers)."""
    ids = np.asarray(train_nodes)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise InvalidArgument(f"train_nodes must be a 1-D integer array, got {ids.dtype} with shape {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise InvalidArgument(f"train_nodes: node ids must be in [0, {num_nodes}), got {ids.min()}..{ids.max()}")
    mask = np.zeros(num_nodes, dtype=np.uint8)
    mask[ids] = 1
    return mask


def _output(out: np.ndarray | None, size: int, name: str) -> np.ndarray:
    """``out`` checked (writable contiguous float32 of ``size``), or a new array when None."""
    if out is None:
        return np.empty(size, dtype=np.float32)
    if (not isinstance(out, np.ndarray) or out.dtype != np.float32 or out.shape != (size,)
            or not out.flags.c_contiguous or not out.flags.writeable):
        raise InvalidArgument(f"smoothed_coefficients: {name} must be a writable contiguous float32 array "
                              f"of {size} entries")
    return out


def smoothed_coefficients(indptr: np.ndarray, node_counts: np.ndarray | None, edge_counts: np.ndarray | None,
                          num_subgraphs: int, prior_p: np.ndarray, prior_alpha: np.ndarray,
                          train_nodes: np.ndarray | None = None, strength: float = DEFAULT_STRENGTH,
                          loss_out: np.ndarray | None = None, alpha_out: np.ndarray | None = None
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients from counts shrunk toward a prior: ``(loss float32 [N], alpha float32 [E])``.

    Beta-posterior means, the prior counting as ``m = strength`` pseudo-subgraphs:

        p_v        = (C(v) + m p0(v)) / (num_subgraphs + m)
        alpha(u,v) = (C(u, v) + m alpha0(u, v)) / (C(v) + m)      (row v, column u)
        loss(v)    = 1 / (p_v |V_train|) on training nodes; 0 elsewhere and where p_v = 0

    With no subgraph counted it is the prior exactly; as counts grow it
    tends to the counts' estimate (bias O(m / C(v))). No floor is needed: an
    edge never seen keeps ``m alpha0 / (C(v) + m)``, a node never seen ``m p0 /
    (num_subgraphs + m)``.

    Args:
        indptr: the full graph's CSR offsets.
        node_counts, edge_counts: ``C(v)`` [N] and ``C(u, v)`` [E] (CSR positions), any integer dtype;
            None for zero counts.
        num_subgraphs: the subgraphs counted.
        prior_p, prior_alpha: ``p0`` [N] and ``alpha0`` [E], e.g. from
            :func:`~saintpipe.services.sampler.inclusion.inclusion_probabilities`.
        train_nodes: training node ids (loss 0 elsewhere); None: all nodes.
        strength: ``m > 0``, the prior's weight in subgraphs.
        loss_out, alpha_out: float32 arrays to write into (in place, each element once with its final
            value, so samplers may read them meanwhile); None: new arrays. ``alpha_out`` may be
            ``prior_alpha`` itself.

    Raises:
        InvalidArgument: a shape that does not fit the graph, a bad strength or count, a bad output array.
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    num_nodes, num_edges = indptr.size - 1, int(indptr[-1])
    if not (math.isfinite(strength) and strength > 0):
        raise InvalidArgument(f"strength must be a finite number > 0, got {strength}")
    if num_subgraphs < 0:
        raise InvalidArgument(f"num_subgraphs must be >= 0, got {num_subgraphs}")
    if node_counts is None or edge_counts is None:
        node_counts = edge_counts = np.empty(0, dtype=np.int64)
    else:
        node_counts, edge_counts = np.ascontiguousarray(node_counts), np.ascontiguousarray(edge_counts)
        if node_counts.shape != (num_nodes,) or edge_counts.shape != (num_edges,):
            raise InvalidArgument(f"counts of shapes {node_counts.shape} and {edge_counts.shape} do not fit a "
                                  f"graph of {num_nodes} nodes and {num_edges} edges")
    prior_p = np.ascontiguousarray(prior_p, dtype=np.float64)
    prior_alpha = np.ascontiguousarray(prior_alpha, dtype=np.float32)
    if prior_p.shape != (num_nodes,) or prior_alpha.shape != (num_edges,):
        raise InvalidArgument(f"prior of shapes {prior_p.shape} and {prior_alpha.shape} does not fit a graph "
                              f"of {num_nodes} nodes and {num_edges} edges")
    loss_out = _output(loss_out, num_nodes, "loss_out")
    alpha_out = _output(alpha_out, num_edges, "alpha_out")
    if train_nodes is None:
        mask, num_train = np.empty(0, dtype=np.uint8), num_nodes
    else:
        mask = _train_mask(train_nodes, num_nodes)
        num_train = int(np.count_nonzero(mask))
    _smoothed_kernel(indptr, node_counts, edge_counts, float(num_subgraphs), prior_p, prior_alpha, mask,
                     num_train, float(strength), loss_out, alpha_out)
    return loss_out, alpha_out