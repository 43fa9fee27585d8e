"""Safe dtype conversion of imported arrays. Errors name the file (or npz member) at fault.

Importers accept what is unambiguous (any integer type for ids, any float or
integer type for features) and refuse what would silently change meaning
(float node ids, object arrays, ids too large for int32). Numbers stored in a
non-native byte order (big-endian files written on another machine, or with
an explicit ``>f4`` dtype) are numbers all the same: they are converted to the
native order, not refused.
"""

from __future__ import annotations

import logging

import numpy as np

from saintpipe.core.errors import DatasetError

log = logging.getLogger(__name__)


def native(array: np.ndarray, where: str) -> np.ndarray:
    """``array`` in the machine's byte order: a converted copy (logged) if it was stored in the other one."""
    if array.dtype.isnative or array.dtype.fields is not None:
        # Structured dtypes are refused by every caller; converting them first would hide that.
        return array
    converted = array.astype(array.dtype.newbyteorder("="))
    log.info("%s: converted %s data to the native byte order (%s)", where, array.dtype.str, converted.dtype.str)
    return converted


def _integers(array: np.ndarray, where: str, what: str, *, one_d: bool = True) -> np.ndarray:
    """``array`` in the native byte order; DatasetError unless it holds integers (or bools), in one dimension
    unless ``one_d`` is false."""
    array = native(array, where)
    if not (np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
        raise DatasetError(f"{where}: {what} must be integers, got dtype {array.dtype}")
    if one_d and array.ndim != 1:
        raise DatasetError(f"{where}: {what} must be 1-D, got shape {array.shape}")
    return array


def as_indptr(array: np.ndarray, where: str) -> np.ndarray:
    """A 1-D integer array as int64."""
    array = _integers(array, where, "indptr")
    return array if array.dtype == np.int64 else array.astype(np.int64)


def as_indices(array: np.ndarray, where: str) -> np.ndarray:
    """A 1-D integer array as int32 (values must fit)."""
    array = _integers(array, where, "indices")
    if array.dtype == np.int32:
        return array
    if array.size and (int(array.max()) >= 2**31 or int(array.min()) < 0):
        bad = int(np.flatnonzero((array < 0) | (array >= 2**31))[0])
        raise DatasetError(f"{where}: neighbour id {int(array[bad])} at position {bad} does not fit a node id")
    return array.astype(np.int32)


def as_features(array: np.ndarray, where: str) -> np.ndarray:
    """A 2-D float (or integer / bool, converted to float32) matrix in the native byte order."""
    if array.ndim != 2:
        raise DatasetError(f"{where}: features must be 2-D [nodes, dim], got shape {array.shape}")
    array = native(array, where)
    if array.dtype in (np.float32, np.float16, np.float64):
        return array
    if np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_:
        return array.astype(np.float32)
    if np.issubdtype(array.dtype, np.floating):
        # long double: float64 keeps what the stored float32/float16 can hold (and overflow shows as inf).
        return array.astype(np.float64)
    raise DatasetError(f"{where}: features must be numbers (float, integer or bool), got dtype {array.dtype}")


def as_labels(array: np.ndarray, where: str) -> np.ndarray:
    """Class ids as int64 [N] (-1 = unlabelled), or a 0/1 matrix as uint8 [N, C]."""
    array = _integers(array, where, "labels", one_d=False)
    if array.ndim == 2:
        if array.size and (array.min() < 0 or array.max() > 1):
            raise DatasetError(f"{where}: a 2-D (multi-label) label matrix must hold only 0 and 1")
        return array.astype(np.uint8)
    if array.ndim != 1:
        raise DatasetError(f"{where}: labels must be 1-D class ids or a 2-D 0/1 matrix, got shape {array.shape}")
    return array.astype(np.int64)


def as_split(array: np.ndarray, num_nodes: int, where: str) -> np.ndarray:
    """A split given as node ids (any integer type) or as a boolean mask of length N, as int64 ids."""
    array = native(array, where)
    if array.dtype == np.bool_:
        if array.shape != (num_nodes,):
            raise DatasetError(f"{where}: a boolean split mask must have {num_nodes} entries, got shape {array.shape}")
        return np.flatnonzero(array).astype(np.int64)
    if not np.issubdtype(array.dtype, np.integer) or array.ndim != 1:
        raise DatasetError(
            f"{where}: a split must be 1-D integer node ids or a boolean mask, got {array.dtype} {array.shape}"
        )
    return array.astype(np.int64)


def split_from_codes(codes: np.ndarray, where: str) -> dict[str, np.ndarray]:
    """Per-node split codes (0 train, 1 val, 2 test, -1 none) as id arrays."""
    codes = native(codes, where)
    if not np.issubdtype(codes.dtype, np.integer) or codes.ndim != 1:
        raise DatasetError(f"{where}: split codes must be 1-D integers (0 train, 1 val, 2 test, -1 none)")
    if (bad := np.flatnonzero((codes < -1) | (codes > 2))).size:
        raise DatasetError(f"{where}: node {int(bad[0])} has split code {int(codes[bad[0]])}; use 0, 1, 2 or -1")
    return {name: np.flatnonzero(codes == k).astype(np.int64) for k, name in enumerate(("train", "val", "test"))}
