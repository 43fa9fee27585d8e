"""The dataset directory's layout: file names, split names, feature shard ranges, and reading one array.

Layout of a dataset directory::

    manifest.json            shapes, dtypes, shard ranges, sha256 of every file (written last)
    indptr.npy               int64 [N+1]
    indices.npy              int32 [E], neighbour lists sorted ascending
    labels.npy               int64 [N] (-1 = unlabelled) or uint8 [N, C] (multi-label)
    split/train.npy, split/val.npy, split/test.npy      int64 node ids
    features/shard-00000.npy ...                         float32/float16 rows [start, stop)
    (extra files, e.g. node_ids.npy for imported edge lists)
    train_graph/             the training graph, when shipped or built (TRAIN_GRAPH_FILES)
    norm/<config_key>/       stored normalization coefficients (:mod:`saintpipe.services.dataset.normalization`)

Shared by the writer and reader (:mod:`~saintpipe.services.dataset.store`), the
verifier (:mod:`~saintpipe.services.dataset.verify`), the importers and the
feature shards; it imports nothing else of the dataset package.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np

from saintpipe.core.errors import DatasetError

SPLITS = ("train", "val", "test")

# The training graph (GraphSAINT's inductive protocol): the graph induced by the training nodes, with its own
# CSR over local ids 0..n-1. nodes.npy maps local id i to global id nodes[i] (sorted ascending).
TRAIN_GRAPH_DIR = "train_graph"
TRAIN_GRAPH_FILES = {
    "indptr": f"{TRAIN_GRAPH_DIR}/indptr.npy",    # int64 [n+1]
    "indices": f"{TRAIN_GRAPH_DIR}/indices.npy",  # int32 [e], local ids, sorted neighbour lists, symmetric
    "nodes": f"{TRAIN_GRAPH_DIR}/nodes.npy",      # int64 [n], global ids, sorted ascending
}


def shard_ranges(num_nodes: int, num_shards: int) -> list[tuple[int, int]]:
    """Split [0, N) into ``num_shards`` contiguous ranges of near-equal size."""
    if num_shards < 1:
        raise DatasetError(f"number of shards must be >= 1, got {num_shards}")
    if num_shards > num_nodes:
        raise DatasetError(f"cannot split {num_nodes} nodes into {num_shards} shards")
    bounds = np.linspace(0, num_nodes, num_shards + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in pairwise(bounds)]


def shard_file(k: int) -> str:
    """The path of feature shard ``k``, relative to the dataset directory."""
    return f"features/shard-{k:05d}.npy"


def load_npy(path: Path, mmap: bool = True) -> np.ndarray:
    """``np.load`` with errors that name the file (missing, truncated, pickled)."""
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ValueError as exc:
        raise DatasetError(f"{path}: not a readable .npy file ({exc}); is it truncated or pickled?") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None
