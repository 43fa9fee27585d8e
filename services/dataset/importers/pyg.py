"""Import a ``torch_geometric.data.Data`` held in memory (PyG users' graphs).

A PyG node-classification graph carries ``edge_index`` (int [2, E], both
directions for an undirected graph), ``x`` (float [N, F]), ``y`` (int [N], or
[N, C] 0/1 for multi-label) and the split as boolean masks ``train_mask`` /
``val_mask`` / ``test_mask`` (Planetoid, Amazon, Coauthor...) or as index
tensors (``train_idx`` ...; OGB's ``get_idx_split()`` can be passed as
``split``). Some datasets (WikiCS) hold several splits as mask columns
[N, K]: ``split_column`` picks one.

Nothing here imports torch: tensors are read through ``.detach().cpu().numpy()``
when they have it, so any object with those attributes works (a plain
namespace of numpy arrays too). The edges are symmetrized (an undirected copy
of a directed ``edge_index``; a no-op for PyG's undirected datasets), then the
arrays go through the same checks as every other importer
(:func:`~saintpipe.services.dataset.importers.arrays.from_arrays`), so errors name
the ``Data`` field at fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.dataset.importers.arrays import from_arrays
from saintpipe.services.dataset.layout import SPLITS
from saintpipe.services.dataset.manifest import FeatureDtype
from saintpipe.services.dataset.store import write_dataset

# Where each split may live on a Data object, first match wins.
_SPLIT_FIELDS = {
    "train": ("train_mask", "train_idx", "train_index"),
    "val": ("val_mask", "valid_mask", "val_idx", "valid_idx", "val_index"),
    "test": ("test_mask", "test_idx", "test_index"),
}
# Keys of a split dictionary (OGB's get_idx_split() says "valid").
_SPLIT_KEYS = {"train": ("train",), "val": ("val", "valid"), "test": ("test",)}


def _numpy(value: Any, field: str) -> np.ndarray:
    """A tensor or array-like as a numpy array; the error names the ``Data`` field."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"Data.{field}: not an array ({type(value).__name__}: {exc})") from None


def _field(data: Any, name: str) -> Any:
    return data.get(name) if isinstance(data, Mapping) else getattr(data, name, None)


def _split_arrays(data: Any, split: Mapping[str, Any] | None, split_column: int | None,
                  num_nodes: int) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    arrays: dict[str, np.ndarray] = {}
    where: dict[str, str] = {}
    for name in SPLITS:
        if split is not None:
            key = next((k for k in _SPLIT_KEYS[name] if k in split), None)
            if key is None:
                raise DatasetError(f"split: no {' or '.join(repr(k) for k in _SPLIT_KEYS[name])} entry "
                                   f"(keys: {', '.join(map(str, split))})")
            value, label = split[key], f"split[{key!r}]"
        else:
            found = next((f for f in _SPLIT_FIELDS[name] if _field(data, f) is not None), None)
            if found is None:
                raise DatasetError(f"Data has no {name} split: none of {', '.join(_SPLIT_FIELDS[name])} "
                                   "(pass split={'train': ..., 'val': ..., 'test': ...})")
            value, label = _field(data, found), f"Data.{found}"
        array = _numpy(value, label.removeprefix("Data."))
        if array.ndim == 2 and array.dtype == np.bool_ and array.shape[0] == num_nodes:
            if split_column is None:
                raise DatasetError(f"{label}: {array.shape[1]} split columns [N, K]; choose one with split_column")
            if not 0 <= split_column < array.shape[1]:
                raise DatasetError(f"{label}: split_column {split_column} out of range [0, {array.shape[1]})")
            array, label = array[:, split_column], f"{label}[:, {split_column}]"
        arrays[name], where[name] = array, label
    return arrays, where


def from_pyg(data: Any, *, name: str = "pyg", split: Mapping[str, Any] | None = None,
             split_column: int | None = None, max_classes: int = checks.DEFAULT_MAX_CLASSES) -> dict[str, Any]:
    """``write_dataset`` arguments from a PyG ``Data`` (or any object with its fields).

    Args:
        data: ``edge_index``, ``x``, ``y`` and the split (masks or index tensors); ``num_nodes``
            is read when present, else ``x``'s rows.
        split: ``{"train": ids or mask, "val"/"valid": ..., "test": ...}`` instead of the fields.
        split_column: which column of [N, K] split masks to use.
        max_classes: refuse labels that imply more classes.

    Raises:
        DatasetError: a missing or malformed field, named (``Data.edge_index: ...``).
    """
    for required in ("edge_index", "x", "y"):
        if _field(data, required) is None:
            raise DatasetError(f"Data.{required} is missing (saintpipe needs edge_index, x, y and a split)")
    features = _numpy(_field(data, "x"), "x")
    if features.ndim != 2:
        raise DatasetError(f"Data.x: features must be [N, F], got shape {features.shape}")
    declared = _field(data, "num_nodes")
    num_nodes = int(declared) if isinstance(declared, (int, np.integer)) else features.shape[0]
    edge_index = _numpy(_field(data, "edge_index"), "edge_index")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or not np.issubdtype(edge_index.dtype, np.integer):
        raise DatasetError(f"Data.edge_index: must be integer [2, E], got {edge_index.dtype} {edge_index.shape}")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        bad = int(np.flatnonzero((edge_index < 0).any(0) | (edge_index >= num_nodes).any(0))[0])
        raise DatasetError(f"Data.edge_index: edge {bad} ({int(edge_index[0, bad])} -> {int(edge_index[1, bad])}) "
                           f"is out of range for {num_nodes} nodes")
    try:
        indptr, indices = edges_to_csr(edge_index[0], edge_index[1], num_nodes, symmetrize=True)
    except DatasetError as exc:
        raise DatasetError(f"Data.edge_index: {exc}") from None
    labels = _numpy(_field(data, "y"), "y")
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]  # OGB's y is [N, 1]
    if labels.ndim == 2:  # multi-label 0/1 rows
        labels = (labels > 0).astype(np.uint8)
    elif np.issubdtype(labels.dtype, np.floating):  # NaN marks unlabelled nodes (ogbn-papers100M)
        labels = np.where(np.isnan(labels), -1, labels).astype(np.int64)
    splits, split_where = _split_arrays(data, split, split_column, num_nodes)
    arrays = {"indptr": indptr, "indices": indices, "features": features, "labels": labels, **splits}
    where = {"indptr": "Data.edge_index", "indices": "Data.edge_index", "features": "Data.x", "labels": "Data.y",
             **split_where}
    return from_arrays(arrays, where, name=name, source="imported from a torch_geometric Data (edges symmetrized)",
                       max_classes=max_classes)


def import_pyg(data: Any, out: Path | str, *, name: str = "pyg", split: Mapping[str, Any] | None = None,
               split_column: int | None = None, num_shards: int = 1, feature_dtype: FeatureDtype = "float32",
               overwrite: bool = False, max_classes: int = checks.DEFAULT_MAX_CLASSES):
    """Write a PyG ``Data`` as a dataset directory at ``out`` (see :func:`from_pyg`); returns its manifest.

    Example::

        from torch_geometric.datasets import Planetoid
        from saintpipe.services.dataset.importers.pyg import import_pyg

        import_pyg(Planetoid("pyg-data", "Cora")[0], "data/cora", name="cora")
    """
    kwargs = from_pyg(data, name=name, split=split, split_column=split_column, max_classes=max_classes)
    return write_dataset(out, **kwargs, num_shards=num_shards, feature_dtype=feature_dtype, overwrite=overwrite,
                         max_classes=max_classes)
