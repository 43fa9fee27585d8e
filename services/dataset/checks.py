"""Validation of dataset arrays. Every check names the file (or field) at fault.

All checks are vectorized or compiled: they run on graphs with hundreds of
millions of edges. The CSR's order and symmetry are checked in place by two
Numba kernels that allocate nothing, so that checking never sets the peak
memory of writing a dataset.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from numba import njit

from saintpipe.core.errors import DatasetError, InvalidArgument

# The default bound on the number of classes a dataset's labels may imply (``--max-classes``).
DEFAULT_MAX_CLASSES = 100_000
# Rows of the feature matrix scanned at once for NaN, to bound extra memory.
_NAN_CHUNK_ROWS = 1 << 16


def check_topology(indptr: np.ndarray, indices: np.ndarray, *, symmetric: bool, where: str = "topology",
                   indptr_where: str | None = None) -> int:
    """Check a CSR adjacency and return its node count.

    Requires int64 ``indptr`` of length N+1 starting at 0 and non-decreasing,
    int32 ``indices`` in [0, N), neighbour lists strictly ascending (sorted, no
    duplicates) and, when ``symmetric``, every edge stored in both directions.
    ``where`` names the indices in errors, ``indptr_where`` the row pointer (default: ``where``).
    """
    at = indptr_where or where
    if indptr.ndim != 1 or indptr.dtype != np.int64:
        raise DatasetError(f"{at}: indptr must be a 1-D int64 array, got {indptr.dtype} with shape {indptr.shape}")
    if indices.ndim != 1 or indices.dtype != np.int32:
        raise DatasetError(f"{where}: indices must be a 1-D int32 array, got {indices.dtype} with shape {indices.shape}")
    if indptr.size < 2:
        raise DatasetError(f"{at}: indptr must have at least 2 entries (one node), got {indptr.size}")
    n = indptr.size - 1
    if indptr[0] != 0:
        raise DatasetError(f"{at}: indptr[0] must be 0, got {indptr[0]}")
    if indptr[-1] != indices.size:
        raise DatasetError(f"{at}: indptr[-1] = {indptr[-1]} but {where} has {indices.size} entries")
    steps = np.diff(indptr)
    if (bad := np.flatnonzero(steps < 0)).size:
        raise DatasetError(f"{at}: indptr decreases at node {bad[0]}")
    if indices.size:
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= n:
            bad_pos = int(np.flatnonzero((indices < 0) | (indices >= n))[0])
            node = int(np.searchsorted(indptr, bad_pos, side="right") - 1)
            raise DatasetError(
                f"{where}: neighbour id {int(indices[bad_pos])} of node {node} is out of range [0, {n})"
            )
        if (node := _first_unsorted_row(indptr, indices)) >= 0:
            raise DatasetError(f"{where}: neighbour list of node {node} is not sorted ascending without duplicates")
    if symmetric and indices.size:
        _check_symmetric(indptr, indices, where)
    return n


@njit(cache=True, nogil=True)
def _first_unsorted_row(indptr, indices):  # pragma: no cover - compiled
    """The first node whose neighbour list is not strictly ascending, or -1."""
    for u in range(indptr.size - 1):
        for p in range(indptr[u] + 1, indptr[u + 1]):
            if indices[p] <= indices[p - 1]:
                return u
    return -1


@njit(cache=True, nogil=True)
def _first_missing_reverse(indptr, indices, above):  # pragma: no cover - compiled
    """For sorted duplicate-free rows: the CSR position of the first entry (u, v) on one side of the diagonal
    (``above``: u < v, else u > v) whose reverse (v, u) is absent (a binary search of row v), or -1; and the
    numbers of entries above and below the diagonal.

    If every entry above the diagonal has its reverse, the reverses are distinct entries below it, so the graph
    is symmetric exactly when both halves also have the same size.
    """
    upper = 0
    lower = 0
    for u in range(indptr.size - 1):
        for p in range(indptr[u], indptr[u + 1]):
            v = indices[p]
            if v == u:
                continue
            if v > u:
                upper += 1
            else:
                lower += 1
            if (v > u) != above:
                continue
            lo, hi = indptr[v], indptr[v + 1]
            while lo < hi:
                mid = (lo + hi) >> 1
                if indices[mid] < u:
                    lo = mid + 1
                else:
                    hi = mid
            if lo == indptr[v + 1] or indices[lo] != u:
                return p, upper, lower
    return -1, upper, lower


def _check_symmetric(indptr: np.ndarray, indices: np.ndarray, where: str) -> None:
    """Every entry (u, v) has its reverse (v, u), given sorted duplicate-free rows (no copy of the edges)."""
    missing, upper, lower = _first_missing_reverse(indptr, indices, True)
    if missing < 0 and upper != lower:  # an entry below the diagonal lacks its reverse above it
        missing = _first_missing_reverse(indptr, indices, False)[0]
    if missing >= 0:
        u = int(np.searchsorted(indptr, missing, side="right") - 1)
        v = int(indices[missing])
        raise DatasetError(f"{where}: adjacency is not symmetric: edge ({u}, {v}) has no reverse edge ({v}, {u})")


def check_features(features: np.ndarray, num_nodes: int, where: str = "features", first_row: int = 0) -> None:
    """Features must be a float [N, F] matrix with no NaN or infinity.

    ``first_row`` is the node id of row 0 (a feature shard), so errors name global node ids.
    """
    if features.ndim != 2:
        raise DatasetError(f"{where}: features must be 2-D [nodes, dim], got shape {features.shape}")
    if features.shape[0] != num_nodes:
        raise DatasetError(f"{where}: features have {features.shape[0]} rows but {num_nodes} nodes are expected")
    if features.shape[1] < 1:
        raise DatasetError(f"{where}: features have zero columns")
    if features.dtype not in (np.float32, np.float16, np.float64):
        raise DatasetError(f"{where}: features must be float32/float16/float64, got {features.dtype}")
    for start in range(0, num_nodes, _NAN_CHUNK_ROWS):
        block = features[start : start + _NAN_CHUNK_ROWS]
        finite = np.isfinite(block)
        if not finite.all():
            r, c = np.argwhere(~finite)[0]
            raise DatasetError(
                f"{where}: feature of node {first_row + start + r}, column {c} is {block[r, c]} (NaN or infinite)"
            )


def class_limit(distinct: int) -> int:
    """The most classes ``distinct`` labels in use can justify: ``max(10 * distinct, distinct + 1000)``.

    Real datasets number their classes densely from 0; some classes may be
    absent from the labelled nodes, but a label far beyond the number in use
    (2**40 among three labels) is corruption, and it would size every model's
    output layer. The slack (ten times, or a thousand more) accepts every
    sparse-but-real numbering while refusing such labels.
    """
    return max(10 * distinct, distinct + 1000)


def distinct_labels(labels: np.ndarray) -> int:
    """How many different class ids (>= 0) occur in int64 single-label ``labels``."""
    labelled = labels[labels >= 0]
    if labelled.size == 0:
        return 0
    if int(labelled.max()) < 4 * labelled.size + 1024:
        # A count per class is cheaper than sorting, and bounded by the size of the labels.
        return int(np.count_nonzero(np.bincount(labelled)))
    return int(np.unique(labelled).size)


def check_labels(labels: np.ndarray, num_nodes: int, where: str = "labels",
                 max_classes: int = DEFAULT_MAX_CLASSES) -> tuple[int, bool]:
    """Return (num_classes, multilabel). int64 [N] class ids (-1 = unlabelled) or uint8 [N, C] multi-hot.

    Single-label ids below -1 are refused, and so is a largest id that implies
    more than ``max_classes`` classes, or more than :func:`class_limit` of the
    distinct ids in use; a multi-label matrix may have at most ``max_classes`` columns.

    Raises:
        DatasetError: naming ``where``, the node and the label at fault.
        InvalidArgument: ``max_classes`` < 1.
    """
    if isinstance(max_classes, bool) or not isinstance(max_classes, (int, np.integer)) or max_classes < 1:
        raise InvalidArgument(f"--max-classes must be an integer of at least 1, got {max_classes!r}")
    if labels.shape[:1] != (num_nodes,):
        raise DatasetError(f"{where}: labels must have {num_nodes} rows, got shape {labels.shape}")
    if labels.ndim == 2:
        if labels.dtype != np.uint8:
            raise DatasetError(f"{where}: multi-label matrix must be uint8, got {labels.dtype}")
        if labels.size and labels.max() > 1:
            raise DatasetError(f"{where}: multi-label matrix must hold only 0 and 1")
        if labels.shape[1] > max_classes:
            raise DatasetError(f"{where}: multi-label matrix has {labels.shape[1]:,} columns (classes); "
                               f"at most {max_classes:,} are allowed (--max-classes)")
        return int(labels.shape[1]), True
    if labels.ndim != 1 or labels.dtype != np.int64:
        raise DatasetError(f"{where}: labels must be int64 [N] class ids or uint8 [N, C], got {labels.dtype} {labels.shape}")
    if labels.size and labels.min() < -1:
        bad = int(np.flatnonzero(labels < -1)[0])
        raise DatasetError(f"{where}: label of node {bad} is {labels[bad]} (class ids are >= 0, -1 = unlabelled)")
    num_classes = int(labels.max()) + 1 if labels.size else 0
    if num_classes < 1:
        raise DatasetError(f"{where}: no node has a label")
    node = int(np.argmax(labels))
    implies = f"{where}: label {num_classes - 1:,} at node {node} implies {num_classes:,} classes"
    if num_classes > max_classes:
        raise DatasetError(f"{implies}; at most {max_classes:,} are allowed (--max-classes)")
    distinct = distinct_labels(labels)
    if num_classes > class_limit(distinct):
        raise DatasetError(f"{implies} but only {distinct:,} distinct labels occur (at most {class_limit(distinct):,} "
                           "classes are accepted for them); number the classes from 0")
    return num_classes, False


def check_split(split: np.ndarray, num_nodes: int, where: str) -> None:
    """A split is a 1-D integer array of distinct node ids in [0, N)."""
    if split.ndim != 1 or not np.issubdtype(split.dtype, np.integer):
        raise DatasetError(f"{where}: split must be a 1-D integer array of node ids, got {split.dtype} {split.shape}")
    if split.size:
        if split.min() < 0 or split.max() >= num_nodes:
            bad = int(split[(split < 0) | (split >= num_nodes)][0])
            raise DatasetError(f"{where}: node id {bad} is out of range [0, {num_nodes})")
        ordered = np.sort(split)  # np.unique hashes first: 3.3 s for a 4 M-node graph's splits, a sort 0.2 s
        if (ordered[1:] == ordered[:-1]).any():
            raise DatasetError(f"{where}: split lists a node id more than once")


def check_splits(splits: Mapping[str, np.ndarray], labels: np.ndarray, num_nodes: int,
                 where: str | Mapping[str, str] = "split {name}") -> None:
    """Check the train / val / test splits together: each valid, pairwise disjoint, every node labelled.

    ``where`` names each split in errors: a mapping split -> name, or a string
    in which ``{name}`` is replaced by the split's name.
    """
    seen = np.zeros(num_nodes, dtype=np.int8)
    # Multi-label rows may legitimately be all zero; a single-label -1 cannot be trained or scored.
    labelled = labels >= 0 if labels.ndim == 1 else None
    for name in ("train", "val", "test"):
        label = where.replace("{name}", name) if isinstance(where, str) else where[name]
        if name not in splits:
            raise DatasetError(f"{label}: split {name!r} is missing")
        ids = np.asarray(splits[name])
        check_split(ids, num_nodes, where=label)
        if (both := ids[seen[ids] != 0]).size:
            raise DatasetError(f"{label}: node {int(both[0])} is also in an earlier split (splits must be disjoint)")
        seen[ids] = 1
        if labelled is not None and (bad := ids[~labelled[ids]]).size:
            raise DatasetError(f"{label}: node {int(bad[0])} has no label (-1) but is in the {name} split")
