"""The built-in demo dataset: planted communities whose labels can be learned.

Nodes belong to one of ``num_classes`` communities. Most edges join nodes of
the same community (``homophily``), and each node's features are its class's
centroid plus strong Gaussian noise, so features alone classify poorly and the
graph (which GNN aggregation exploits) helps a lot.

Arguments are checked before anything is allocated, the size against the
available memory too (:func:`demo_peak_bytes`), so an absurd ``--nodes`` is one
clear error rather than a MemoryError.
"""

from __future__ import annotations

import numpy as np

from saintpipe.core.memory import require_memory
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.dataset.params import MAX_NODES, require_float, require_int, require_seed


def demo_peak_bytes(num_nodes: int, num_classes: int, mean_degree: float, feature_dim: int) -> int:
    """About the peak memory of :func:`generate_demo` (measured with tracemalloc, within ~5%).

    Per node: labels, their sort order and the row pointer (24 bytes). Per
    drawn pair: ~100 bytes while the CSR is built (endpoint and key arrays,
    np.unique's copies); while the features are drawn, the pair arrays still
    held (~45 bytes per pair) plus float64 noise and float32 copies (16 bytes
    per feature), whichever phase is larger; plus the class centroids.
    """
    pairs = int(num_nodes * mean_degree / 2)
    return 24 * num_nodes + max(100 * pairs, 16 * num_nodes * feature_dim + 45 * pairs) + 4 * num_classes * feature_dim


def generate_demo(
    num_nodes: int = 30_000,
    num_classes: int = 8,
    mean_degree: float = 12.0,
    feature_dim: int = 64,
    homophily: float = 0.8,
    noise: float = 3.0,
    seed: int = 0,
) -> dict[str, object]:
    """Return the demo graph as arrays ready for :func:`saintpipe.services.dataset.store.write_dataset`.

    Raises:
        InvalidArgument: an argument out of range (``--nodes must be at least 1, got -5``), or a graph
            that needs more memory than is available.
    """
    require_int("--nodes", num_nodes, 1)
    require_seed(seed)
    require_int("num_classes", num_classes, 1, MAX_NODES)
    require_int("feature_dim", feature_dim, 1)
    require_float("mean_degree", mean_degree, 0.0, float(MAX_NODES))
    require_float("homophily", homophily, 0.0, 1.0)
    require_float("noise", noise, 0.0)
    require_memory(demo_peak_bytes(num_nodes, num_classes, mean_degree, feature_dim),
                   f"demo dataset of {num_nodes:,} nodes", hint="use fewer --nodes")
    # After the memory check, so that an absurd --nodes is told what it would cost; node ids are int32.
    require_int("--nodes", num_nodes, 1, MAX_NODES)
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
