"""Pure routing of node ids to contiguous shard ranges."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from saintpipe.core.errors import InvalidArgument


def shard_starts(ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    """Boundaries ``[start_0, start_1, ..., stop_last]`` of contiguous ranges covering ``[0, N)``.

    Raises:
        InvalidArgument: the ranges are empty, do not start at 0, leave a gap or overlap.
    """
    if not ranges:
        raise InvalidArgument("no shard ranges given")
    expected = 0
    for k, (start, stop) in enumerate(ranges):
        if start != expected:
            what = "gap" if start > expected else "overlap"
            raise InvalidArgument(
                f"shard {k} starts at node {start}, expected {expected} ({what} between shards)"
            )
        if stop <= start:
            raise InvalidArgument(f"shard {k} has an empty or negative range [{start}, {stop})")
        expected = stop
    return np.array([start for start, _ in ranges] + [expected], dtype=np.int64)


def check_ids(ids: np.ndarray, num_nodes: int) -> np.ndarray:
    """``ids`` as a 1-D int64 array, every id in ``[0, num_nodes)``.

    Raises:
        InvalidArgument: not 1-D integers, or naming the first id out of range and its position.
    """
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InvalidArgument(f"node ids must be a 1-D array, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InvalidArgument(f"node ids must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        bad = (arr < 0) | (arr >= num_nodes)
        if bad.any():
            pos = int(np.argmax(bad))
            raise InvalidArgument(
                f"node id {int(arr[pos])} (position {pos}) is outside the dataset's range [0, {num_nodes})"
            )
    return arr


def split_sorted(sorted_ids: np.ndarray, starts: np.ndarray) -> list[tuple[int, int, int]]:
    """Cut sorted ids into per-shard slices.

    Args:
        sorted_ids: ascending global ids, all within ``[starts[0], starts[-1])``.
        starts: shard boundaries from :func:`shard_starts`.

    Returns:
        ``(shard, lo, hi)`` for every shard with ids: ``sorted_ids[lo:hi]`` belong to ``shard``.
    """
    cuts = np.searchsorted(sorted_ids, starts, side="left")
    return [(k, int(lo), int(hi)) for k, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])) if hi > lo]


def pieces(lo: int, hi: int, max_len: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut into consecutive pieces of at most ``max_len`` (>= 1)."""
    step = max(1, int(max_len))
    return [(a, min(a + step, hi)) for a in range(lo, hi, step)]


def first_occurrences(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Deduplicate ``ids`` for fetching.

    Returns:
        ``(unique, first, inverse)``: ascending unique ids, the position in
        ``ids`` of each one's first occurrence, and for every position the index
        of its id in ``unique`` (so ``unique[inverse] == ids``).
    """
    ids = np.asarray(ids).reshape(-1)
    if ids.size == 0:
        return ids.copy(), np.empty(0, np.intp), np.empty(0, np.intp)
    # numpy's unique(return_index=True) asks for a stable (merge) sort, several times slower than the default
    # quicksort; the first occurrence of each id is the smallest position among its equals anyway.
    order = np.argsort(ids)
    ordered = ids[order]
    starts_run = np.empty(ids.size, dtype=bool)
    starts_run[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts_run[1:])
    starts = np.flatnonzero(starts_run)
    inverse = np.empty(ids.size, dtype=np.intp)
    inverse[order] = np.cumsum(starts_run) - 1
    return ordered[starts], np.minimum.reduceat(order, starts), inverse
