"""Feature, label and split files that accompany an edge list, keyed by the edge list's node ids.

A ``.npy`` side file is indexed by integer node id (row i belongs to node
``i``); a text table (CSV/TSV) has the node id in its first column. So side
files work for integer and string ids alike, in any row order. A ``.npy``
side file's header is checked before it is loaded
(:mod:`~saintpipe.services.dataset.importers.input_files`), and its values are
converted to the native byte order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers import coerce, input_files, tabular
from saintpipe.services.dataset.layout import load_npy

SPLIT_NAMES = {"train": 0, "val": 1, "valid": 1, "validation": 1, "test": 2, "none": -1, "-": -1, "": -1,
               "0": 0, "1": 1, "2": 2, "-1": -1}


@dataclass
class Keyed:
    """Values keyed by original node id (``keys`` int64 or str, one per row of ``values``)."""

    keys: np.ndarray
    values: np.ndarray
    where: str
    names: np.ndarray | None = None  # class names when labels were given as names


def show_id(value) -> str:
    """A node id for an error message: 42 or 'alice', without numpy's type wrapper."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def is_npy(path: Path) -> bool:
    return path.suffix.lower() == ".npy"


def _npy_keyed(path: Path, string_ids: bool) -> Keyed:
    if string_ids:
        raise DatasetError(f"{path}: a .npy side file is indexed by integer node id, but --string-ids reads "
                           "ids as strings; give a CSV keyed by id instead")
    input_files.npy_file_header(path)  # loaded whole: its declared size must fit first
    values = coerce.native(load_npy(path, mmap=False), str(path))
    if values.ndim == 0:
        raise DatasetError(f"{path}: expected one row per node, got a scalar")
    return Keyed(keys=np.arange(values.shape[0], dtype=np.int64), values=values, where=str(path))


def _check_unique(keyed: Keyed) -> Keyed:
    order = np.argsort(keyed.keys, kind="stable")
    sorted_keys = keyed.keys[order]
    if (dup := np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])).size:
        raise DatasetError(f"{keyed.where}: node id {show_id(sorted_keys[dup[0]])} appears more than once")
    return keyed


def _id_table(path: Path, string_ids: bool, wanted: str) -> tuple[tabular.TableFormat, np.ndarray]:
    """A table's format and its node ids (column 0); ``wanted`` says what the table lacks with one column."""
    fmt = tabular.sniff(path)
    if fmt.num_columns < 2:
        raise DatasetError(f"{path}: {wanted}")
    return fmt, tabular.read_ids(path, fmt, 0, string_ids)


def read_features(path: Path, string_ids: bool) -> Keyed:
    """Feature rows: ``.npy`` [rows, F] by id, or a table ``id, f1, f2, ...``."""
    if is_npy(path):
        keyed = _npy_keyed(path, string_ids)
        if keyed.values.ndim != 2:
            raise DatasetError(f"{path}: features must be 2-D [nodes, dim], got shape {keyed.values.shape}")
        return keyed
    fmt = tabular.sniff(path)
    if fmt.num_columns < 2:
        raise DatasetError(f"{path}: a feature table needs a node id column and at least one value column")
    values = tabular.read_columns(path, fmt, tuple(range(1, fmt.num_columns)), np.float32)
    return _check_unique(Keyed(keys=tabular.read_ids(path, fmt, 0, string_ids), values=values, where=str(path)))


def read_labels(path: Path, string_ids: bool) -> Keyed:
    """Labels: ``.npy`` [rows] class ids or [rows, C] 0/1 by id, or a table ``id, label`` (an
    integer class id or a class name) or ``id, l1, l2, ...`` (0/1 multi-label)."""
    if is_npy(path):
        return _npy_keyed(path, string_ids)
    fmt, keys = _id_table(path, string_ids, "a label table needs a node id column and a label column")
    if fmt.num_columns > 2:
        values = tabular.read_columns(path, fmt, tuple(range(1, fmt.num_columns)), np.int64)
        return _check_unique(Keyed(keys=keys, values=values, where=str(path)))
    raw = tabular.read_columns(path, fmt, 1, str)
    try:
        values = raw.astype(np.int64)
        names = None
    except ValueError:
        # Class names: numbered in sorted order, the names kept beside the dataset.
        names, values = np.unique(raw, return_inverse=True)
        values = values.astype(np.int64)
    return _check_unique(Keyed(keys=keys, values=values, where=str(path), names=names))


def read_split_codes(path: Path, string_ids: bool) -> Keyed:
    """A per-node split: ``.npy`` codes by id (0 train, 1 val, 2 test, -1 none) or a table ``id, split``."""
    if is_npy(path):
        return _npy_keyed(path, string_ids)
    fmt, keys = _id_table(path, string_ids,
                          "a split table needs a node id column and a split column (train/val/test)")
    raw = np.char.lower(tabular.read_columns(path, fmt, 1, str))
    codes = np.full(raw.size, -2, dtype=np.int64)
    for word, code in SPLIT_NAMES.items():
        codes[raw == word] = code
    if (bad := np.flatnonzero(codes == -2)).size:
        raise DatasetError(f"{path}: split value {show_id(raw[bad[0]])} of node {show_id(keys[bad[0]])} is not train, val, test or none")
    return _check_unique(Keyed(keys=keys, values=codes, where=str(path)))


def read_id_list(path: Path, string_ids: bool) -> tuple[np.ndarray, str]:
    """Node ids of one split: ``.npy`` integer ids or a boolean mask by id, or a table with ids in column 0."""
    if is_npy(path):
        if string_ids:
            raise DatasetError(f"{path}: a .npy id list needs integer node ids, but --string-ids reads ids as "
                               "strings; give one id per line instead")
        input_files.npy_file_header(path)
        ids = coerce.native(load_npy(path, mmap=False), str(path))
        if ids.dtype == np.bool_:
            if ids.ndim != 1:
                raise DatasetError(f"{path}: a boolean split mask must be 1-D, got shape {ids.shape}")
            return np.flatnonzero(ids).astype(np.int64), str(path)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise DatasetError(f"{path}: a split must be 1-D integer node ids or a boolean mask, got {ids.dtype} {ids.shape}")
        return ids.astype(np.int64), str(path)
    fmt = tabular.sniff(path)
    return tabular.read_ids(path, fmt, 0, string_ids), str(path)
