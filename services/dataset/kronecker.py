"""Kronecker (R-MAT) graphs, the synthetic graphs of GraphSAINT section 7.1.

The paper follows Leskovec et al. (its reference [14]) with an initiator
proportional to ``[[0.9, 0.5], [0.5, 0.1]]``: normalised, an edge falls in the
top-left quadrant of the adjacency matrix with probability 0.45, top-right or
bottom-left 0.25 each, bottom-right 0.05, recursively over ``scale`` levels.
That is the R-MAT sampling of the stochastic Kronecker graph, so one random
draw per edge per level decides both endpoint bits.

Everything is vectorized over edges and chunked: a chunk of edges draws its
quadrants level by level with numpy, so memory stays a few arrays of the final
edge count and nothing loops over edges in Python.

The graph is undirected (symmetrized), without self loops or duplicate edges.
R-MAT draws many duplicates on its hubs, so the generator tops up in rounds
until it holds ``N * degree / 2`` distinct pairs, then drops the random surplus:
the stored mean degree (directed entries / N) comes out at ``degree``.
Node ids are randomly permuted so that hubs do not all sit at low ids.
Features and labels are random numbers, as the paper's synthetic set.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from saintpipe.core.argtypes import Bounds
from saintpipe.core.bars import ProgressBar
from saintpipe.core.errors import InvalidArgument
from saintpipe.core.memory import require_memory
from saintpipe.services.dataset.csr import sorted_unique
from saintpipe.services.dataset.params import KRONECKER_FLAGS, KroneckerParams, check, require

log = logging.getLogger(__name__)

# The paper's initiator, normalised to quadrant probabilities a, b, c, d.
INITIATOR = np.array([[0.9, 0.5], [0.5, 0.1]])
_A, _B, _C, _D = (INITIATOR / INITIATOR.sum()).ravel()

# Edges drawn per chunk: bounds the temporary arrays (a few times 8 bytes each).
_CHUNK = 1 << 21
# Give up topping up when a round keeps under this share of its new draws.
_MIN_YIELD = 0.01
_MAX_ROUNDS = 30
# The defaults of the optional arguments (and of their flags): KroneckerParams'.
_DEFAULTS = {name: field.default for name, field in KroneckerParams.model_fields.items() if not field.is_required()}


def kronecker_peak_bytes(scale: int, degree: float, feature_dim: int) -> int:
    """About the peak memory of :func:`generate_kronecker` (measured with tracemalloc, within ~10%).

    While the CSR is built: ~28 bytes per directed entry (the int64 key buffer
    of both directions, the drawn keys, the int32 indices); then the CSR (12
    bytes per entry) stays while the float32 features (4 bytes each) are drawn,
    whichever phase is larger; plus ~24 bytes per node (permutation, row
    pointer, labels, splits).
    """
    n = 1 << scale
    entries = int(n * degree)
    return 24 * n + max(28 * entries, 12 * entries + 4 * n * feature_dim)


def rmat_edges(num_edges: int, scale: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``num_edges`` directed R-MAT edges on ``2**scale`` nodes (duplicates and self loops included).

    Returns (src, dst) as int64 arrays. One uniform draw per edge per level
    picks the quadrant: ``r < a`` top-left, ``< a+b`` top-right, ``< a+b+c``
    bottom-left, else bottom-right.
    """
    src = np.zeros(num_edges, dtype=np.int64)
    dst = np.zeros(num_edges, dtype=np.int64)
    for level in range(scale):
        r = rng.random(num_edges, dtype=np.float32)
        row_bit = r >= _A + _B
        col_bit = np.where(row_bit, r >= _A + _B + _C, r >= _A)
        bit = np.int64(1) << (scale - 1 - level)
        src += row_bit * bit
        dst += col_bit * bit
    return src, dst


def _draw_pair_keys(num_pairs: int, scale: int, perm: np.ndarray, rng: np.random.Generator,
                    bar: ProgressBar) -> np.ndarray:
    """``num_pairs`` R-MAT edges as sorted distinct undirected keys ``min * N + max`` (self loops dropped)."""
    n = np.int64(perm.size)
    keys = np.empty(num_pairs, dtype=np.int64)
    filled = 0
    for start in range(0, num_pairs, _CHUNK):
        count = min(_CHUNK, num_pairs - start)
        src, dst = rmat_edges(count, scale, rng)
        src, dst = perm[src], perm[dst]
        keep = src != dst
        lo = np.minimum(src[keep], dst[keep])
        hi = np.maximum(src[keep], dst[keep])
        keys[filled : filled + lo.size] = lo * n + hi
        filled += lo.size
        bar.update(count)
    return sorted_unique(keys[:filled], in_place=True)


def kronecker_topology(scale: int, degree: float, rng: np.random.Generator,
                       progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The symmetric CSR (indptr int64, indices int32) of an R-MAT graph with mean degree ``degree``."""
    n = 1 << scale
    target = int(round(n * degree / 2))
    perm = rng.permutation(n).astype(np.int64)
    with ProgressBar(total=target, unit="edge", desc="kronecker edges", disable=not progress, leave=False) as bar:
        keys = _draw_pair_keys(target, scale, perm, rng, bar)
        for _ in range(_MAX_ROUNDS):
            missing = target - keys.size
            if missing <= 0:
                break
            # Duplicates concentrate on hubs, so later draws keep fewer; overshoot a bit.
            draw = int(missing / max(keys.size / max(target, 1), 0.05) * 1.1) + 16
            bar.total += draw
            extra = _draw_pair_keys(draw, scale, perm, rng, bar)
            before = keys.size
            keys = sorted_unique(np.concatenate([keys, extra]), in_place=True)
            del extra
            if (keys.size - before) < _MIN_YIELD * draw:
                log.warning("kronecker: graph saturated at %d of %d pairs; mean degree %.2f instead of %.2f",
                            keys.size, target, 2 * keys.size / n, degree)
                break
    if keys.size > target:
        # Drop a uniform random surplus so the mean degree is exactly the target.
        keys = np.delete(keys, rng.choice(keys.size, size=keys.size - target, replace=False))
    # Both directions go into one buffer; dropping `keys` first keeps the peak at 3 * 8 bytes per pair.
    directed = np.empty(2 * keys.size, dtype=np.int64)
    directed[: keys.size] = keys
    del keys
    return _symmetric_csr(directed, n)


def _symmetric_csr(directed: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of an undirected graph from ``directed`` whose first half holds its keys ``lo * n + hi``.

    The second half is scratch: it receives the reverse keys ``hi * n + lo``.
    The buffer is then sorted and reused in place, so temporaries stay chunk-sized.
    """
    m = directed.size // 2
    nn = np.int64(n)
    forward, reverse = directed[:m], directed[m:]
    np.remainder(forward, nn, out=reverse)
    reverse *= nn
    for start in range(0, m, _CHUNK):
        stop = min(start + _CHUNK, m)
        reverse[start:stop] += forward[start:stop] // nn
    directed.sort()
    # Row r's entries are the keys in [r*n, (r+1)*n): the row pointer is a search, not a bincount.
    indptr = np.searchsorted(directed, np.arange(n + 1, dtype=np.int64) * nn).astype(np.int64)
    np.remainder(directed, nn, out=directed)
    indices = directed.astype(np.int32)
    return indptr, indices


def random_splits(n: int, rng: np.random.Generator,
                  fractions: tuple[float, float] = (0.6, 0.2)) -> dict[str, np.ndarray]:
    """Random disjoint train / val / test node id arrays (sorted); ``fractions`` are train and val."""
    perm = rng.permutation(n)
    n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
    return {
        "train": np.sort(perm[:n_train]).astype(np.int64),
        "val": np.sort(perm[n_train : n_train + n_val]).astype(np.int64),
        "test": np.sort(perm[n_train + n_val :]).astype(np.int64),
    }


def generate_kronecker(
    scale: int,
    degree: float,
    *,
    seed: int = _DEFAULTS["seed"],
    feature_dim: int = _DEFAULTS["feature_dim"],
    num_classes: int = _DEFAULTS["num_classes"],
    progress: bool = False,
) -> dict[str, Any]:
    """Generate a Kronecker (R-MAT) graph as arrays ready for :func:`saintpipe.services.dataset.store.write_dataset`.

    Args:
        scale: the graph has ``2**scale`` nodes (1 to 30).
        degree: mean degree, directed CSR entries / N, after symmetrizing and deduplicating.
        seed: random seed in ``[0, 2**63 - 1]`` (:data:`~saintpipe.core.seeds.SEED_MAX`); the same arguments
            give the same graph.
        feature_dim: columns of the random (standard normal) float32 feature matrix.
        num_classes: labels are uniform random class ids in ``[0, num_classes)``.
        progress: show a progress bar on stderr.

    Returns:
        A dict with ``name, indptr, indices, features, labels, splits, source``.

    Raises:
        InvalidArgument: an impossible scale, degree, seed, feature dim or class count (named as
            its flag), or a graph that needs more memory than is available.

    Example:
        >>> d = generate_kronecker(10, 8)
        >>> d["indptr"].size - 1, round(d["indices"].size / 1024)
        (1024, 8)
    """
    check(KroneckerParams, KRONECKER_FLAGS, scale=scale, degree=degree, seed=seed, feature_dim=feature_dim,
          num_classes=num_classes)
    n = 1 << scale
    if not degree < n - 1:
        raise InvalidArgument(f"--degree must be in (0, {n - 1}) for 2^{scale} nodes, got {degree:g}")
    require("--classes", num_classes, Bounds(1, n), True)  # every class gets at least one node
    require_memory(kronecker_peak_bytes(scale, degree, feature_dim),
                   f"kronecker graph of 2^{scale} nodes (mean degree {degree:g}, {feature_dim} features)",
                   hint="use a smaller --scale, --degree or --feature-dim")
    rng = np.random.default_rng(seed)
    indptr, indices = kronecker_topology(scale, degree, rng, progress=progress)
    features = rng.standard_normal((n, feature_dim), dtype=np.float32)
    labels = rng.integers(0, num_classes, size=n, dtype=np.int64)
    if num_classes > 1:
        labels[rng.choice(n, size=min(n, num_classes), replace=False)] = np.arange(min(n, num_classes))
    return {
        "name": f"kronecker-s{scale}-d{degree:g}",
        "indptr": indptr,
        "indices": indices,
        "features": features,
        "labels": labels,
        "splits": random_splits(n, rng),
        "source": (f"saintpipe Kronecker (R-MAT) generator, initiator [[0.9, 0.5], [0.5, 0.1]], "
                   f"scale={scale}, degree={degree:g}, seed={seed}"),
    }
