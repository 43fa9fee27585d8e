"""Random subgraphs for benchmarks and tests: symmetric pattern, GraphSAINT-like asymmetric weights."""

from __future__ import annotations

import numpy as np

from saintpipe.core.subgraph import Subgraph
from saintpipe.trainer.batch import mean_aggregation_weights
from saintpipe.trainer.sparse import transpose_permutation


def random_subgraph(n: int, mean_degree: float, seed: int = 0, mean_weights: bool = False) -> Subgraph:
    """A subgraph with ``n`` nodes, about ``mean_degree`` neighbours each, sorted CSR rows.

    Args:
        n: nodes.
        mean_degree: mean number of neighbours (the pattern is symmetric, no self-loops).
        seed: random seed.
        mean_weights: weights 1/deg(v) (mean aggregation) instead of random ones in [0.05, 1).

    Returns:
        A :class:`~saintpipe.core.subgraph.Subgraph` whose ``edge_weights_t`` is the
        transpose of ``edge_weights`` (Algorithm 6) and whose loss weights are random in [0.5, 2).
    """
    rng = np.random.default_rng(seed)
    m = int(n * mean_degree / 2)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    both = np.concatenate([np.stack([src[keep], dst[keep]], 1), np.stack([dst[keep], src[keep]], 1)])
    pairs = np.unique(both, axis=0)  # sorted by (row, column): CSR order
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs[:, 0], minlength=n), out=indptr[1:])
    indices = pairs[:, 1].astype(np.int32)
    if mean_weights:
        w = mean_aggregation_weights(indptr, indices)[0]
    else:
        w = rng.uniform(0.05, 1.0, len(pairs)).astype(np.float32)
    w_t = w[transpose_permutation(indptr, indices)]
    return Subgraph(
        node_ids=np.arange(n, dtype=np.int64), indptr=indptr, indices=indices, edge_weights=w,
        edge_weights_t=w_t, loss_weights=rng.uniform(0.5, 2.0, n).astype(np.float32),
    )
