"""Random, valid subgraphs for the pool's benchmark and tests (no sampler needed)."""

from __future__ import annotations

import numpy as np

from saintpipe.core.subgraph import Subgraph


def random_subgraph(
    num_nodes: int, num_edges: int, *, seed: int = 0, job_id: str = "", worker: int = 0, sequence: int = 0
) -> Subgraph:
    """A subgraph with ``num_nodes`` nodes and about ``num_edges`` CSR entries (duplicates merged).

    Rows are sorted and free of duplicates, node ids strictly ascending, weights
    finite: it passes every check of the codec. Vectorized, no Python loop.
    """
    rng = np.random.default_rng(seed)
    node_ids = np.sort(rng.choice(max(num_nodes * 4, 1), size=num_nodes, replace=False)).astype(np.int64)
    if num_nodes:
        keys = np.unique(
            rng.integers(0, num_nodes, size=num_edges, dtype=np.int64) * num_nodes
            + rng.integers(0, num_nodes, size=num_edges, dtype=np.int64)
        )
    else:
        keys = np.zeros(0, dtype=np.int64)
    rows, cols = np.divmod(keys, max(num_nodes, 1))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_nodes), out=indptr[1:])
    e = cols.size
    return Subgraph(
        node_ids=node_ids,
        indptr=indptr,
        indices=cols.astype(np.int32),
        edge_weights=rng.random(e, dtype=np.float32),
        edge_weights_t=rng.random(e, dtype=np.float32),
        loss_weights=rng.random(num_nodes, dtype=np.float32),
        job_id=job_id,
        worker=worker,
        sequence=sequence,
        seed=seed,
    )
