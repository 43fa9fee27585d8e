"""The built-in demo dataset: planted communities whose labels can be learned.

Nodes belong to one of ``num_classes`` communities. Most edges join nodes of
the same community (``homophily``), and each node's features are its class's
centroid plus strong Gaussian noise, so features alone classify poorly and the
graph (which GNN aggregation exploits) helps a lot.
"""

from __future__ import annotations

import numpy as np

from saintpipe.services.dataset.csr import edges_to_csr


def generate_demo(
    num_nodes: int = 30_000,
    num_classes: int = 8,
    mean_degree: float = 12.0,
    feature_dim: int = 64,
    homophily: float = 0.8,
    noise: float = 3.0,
    seed: int = 0,
) -> dict[str, object]:
    """Return the demo graph as arrays ready for :func:`saintpipe.services.dataset.store.write_dataset`."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=num_nodes, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    class_start = np.searchsorted(labels[order], np.arange(num_classes + 1))
    class_size = np.diff(class_start)

    num_pairs = int(num_nodes * mean_degree / 2)
    src = rng.integers(0, num_nodes, size=num_pairs)
    same = rng.random(num_pairs) < homophily
    # Same-class partner: a uniform member of src's class block in `order`.
    cls = labels[src]
    offset = (rng.random(num_pairs) * class_size[cls]).astype(np.int64)
    dst = np.where(same, order[class_start[cls] + offset], rng.integers(0, num_nodes, size=num_pairs))
    indptr, indices = edges_to_csr(src, dst, num_nodes, symmetrize=True)

    centroids = rng.normal(0.0, 1.0, size=(num_classes, feature_dim)).astype(np.float32)
    features = centroids[labels] + rng.normal(0.0, noise, size=(num_nodes, feature_dim)).astype(np.float32)

    perm = rng.permutation(num_nodes)
    n_train, n_val = int(0.5 * num_nodes), int(0.2 * num_nodes)
    splits = {
        "train": np.sort(perm[:n_train]),
        "val": np.sort(perm[n_train : n_train + n_val]),
        "test": np.sort(perm[n_train + n_val :]),
    }
    return {
        "name": "demo",
        "indptr": indptr,
        "indices": indices,
        "features": features.astype(np.float32),
        "labels": labels,
        "splits": splits,
        "source": f"saintpipe demo generator (planted communities, seed={seed})",
    }
