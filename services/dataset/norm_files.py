"""The files of a normalization stored with a dataset, readable without the sampler kernels.

The layout (``DATASET_DIR/norm/<config_key>/``: the two coefficient arrays and
``meta.json``) is :mod:`saintpipe.services.dataset.normalization`'s, which
writes and reuses it; this module holds the names and a reader for processes
that only read it, such as a trainer inducing node sets from the pool
(``wire = "nodes"``), which may not import the sampler kernels.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from saintpipe.core.errors import DatasetError

NORM_DIR = "norm"
META_NAME = "meta.json"
LOSS_FILE = "loss_coefficients.npy"  # float32 [N] (training graph: [n], its local ids)
AGGREGATOR_FILE = "aggregator_coefficients.npy"  # float32 [E], alpha at the sampled graph's CSR positions
FILES = (LOSS_FILE, AGGREGATOR_FILE)


def store_key(config_key: str, method: str = "reference", graph: str = "full") -> str:
    """The folder name of a stored normalization: the sampler config's key, plus the estimator unless it is
    GraphSAINT's reference (whose folders keep the plain key, as stored before the other estimators existed),
    plus ``.train`` when it was made on the training graph (its arrays index that graph's nodes and CSR
    positions, not the full graph's: ``meta.json`` then says ``graph: train``)."""
    key = config_key if method == "reference" else f"{config_key}.{method}"
    return key if graph == "full" else f"{key}.{graph}"


def train_digest(train_nodes: np.ndarray | None) -> str:
    """A short digest of the training node ids (``"all"`` for None), recorded in ``meta.json``."""
    if train_nodes is None:
        return "all"
    return hashlib.sha256(np.ascontiguousarray(train_nodes, dtype=np.int64).tobytes()).hexdigest()[:16]


def read_stored(directory: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(loss_coefficients, aggregator_coefficients, meta)`` of a stored normalization, memory-mapped.

    Raises:
        DatasetError: naming the file that is missing or unreadable.
    """
    meta_path = directory / META_NAME
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise DatasetError(f"{meta_path}: not found") from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{meta_path}: unreadable: {exc}") from None
    if not isinstance(meta, dict):
        raise DatasetError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
    arrays = []
    for name in FILES:
        try:
            # A plain ndarray over the map, not an np.memmap: pickle (Ray's object store) sends an np.memmap
            # in-band, so every sampler worker unpickled a private copy (1.1 GB of coefficients per worker at
            # Kronecker scale 24); a plain array travels out-of-band and is mapped zero-copy by each worker.
            arrays.append(np.asarray(np.load(directory / name, mmap_mode="r", allow_pickle=False)))
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{directory / name}: unreadable: {exc}") from None
    return arrays[0], arrays[1], meta
