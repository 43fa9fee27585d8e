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

from pathlib import Path
from typing import Any

import numpy as np

from saintpipe.core.memory import require_memory
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.dataset.kronecker import random_splits
from saintpipe.services.dataset.params import DEMO, DEMO_FLAGS, DemoParams, check


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
    num_nodes: int = DEMO.num_nodes,
    num_classes: int = DEMO.num_classes,
    mean_degree: float = DEMO.mean_degree,
    feature_dim: int = DEMO.feature_dim,
    homophily: float = DEMO.homophily,
    noise: float = DEMO.noise,
    seed: int = DEMO.seed,
) -> dict[str, Any]:
    """Return the demo graph as arrays ready for :func:`saintpipe.services.dataset.store.write_dataset`.

    Raises:
        InvalidArgument: an argument out of range (``--nodes must be at least 1, got -5``), or a graph
            that needs more memory than is available.
    """
    # The arguments' ranges are DemoParams' (the flags' too); --nodes' upper bound after the memory check, below.
    check(DemoParams, DEMO_FLAGS, lower_only=frozenset({"num_nodes"}), num_nodes=num_nodes, seed=seed,
          num_classes=num_classes, feature_dim=feature_dim, mean_degree=mean_degree, homophily=homophily, noise=noise)
    require_memory(demo_peak_bytes(num_nodes, num_classes, mean_degree, feature_dim),
                   f"demo dataset of {num_nodes:,} nodes", hint="use fewer --nodes")
    # After the memory check, so that an absurd --nodes is told what it would cost; node ids are int32.
    check(DemoParams, DEMO_FLAGS, num_nodes=num_nodes)
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

    splits = random_splits(num_nodes, rng, fractions=(0.5, 0.2))
    return {
        "name": "demo",
        "indptr": indptr,
        "indices": indices,
        "features": features.astype(np.float32),
        "labels": labels,
        "splits": splits,
        "source": f"saintpipe demo generator (planted communities, seed={seed})",
    }


def ensure_demo_dataset() -> Path:
    """Generate the demo dataset on first use and return its directory."""
    from saintpipe.core.paths import demo_dataset_dir
    from saintpipe.services.dataset.store import write_dataset

    out = demo_dataset_dir()
    if not (out / "manifest.json").is_file():
        print(f"generating the demo dataset in {out} (first run only)")
        write_dataset(out, num_shards=2, overwrite=out.exists(), **generate_demo())
    return out
