"""Import GraphSAINT's dataset format (ppi, flickr, reddit, yelp, amazon), keeping its training graph.

A GraphSAINT dataset is a directory::

    adj_full.npz     scipy.sparse CSR (save_npz: indptr, indices, data, shape, format), N x N, the whole graph
    adj_train.npz    the same for the training graph: N x N, edges among training nodes only
    feats.npy        float [N, F]
    class_map.json   {"node id": class} or {"node id": [0, 1, ...]} (multi-label)
    role.json        {"tr": [ids], "va": [ids], "te": [ids]}

The npz files are read with numpy (no pickle, headers checked first); only the
structure counts (``indptr``, ``indices``), the ``data`` values are ignored as
GraphSAINT does. ``csc`` matrices are read as the transposed CSR; other sparse
formats are refused. Everything is cross-checked: shapes, ids in range, every
node in ``class_map``, ``adj_train`` joining training nodes only and holding
exactly the edges ``adj_full`` has between them (the graph the training nodes
induce, as GraphSAINT defines it). Both adjacencies must be sorted and symmetric
unless ``symmetrize`` rebuilds them so (``--symmetrize``, as for npz imports).

GraphSAINT's protocol is inductive: subgraphs are drawn from the training
graph. ``adj_train`` is kept as the dataset's training graph
(:data:`~saintpipe.services.dataset.layout.TRAIN_GRAPH_FILES`: its CSR over
local ids, and ``nodes.npy``, the sorted training node ids; every training
node is there, also one isolated in ``adj_train``), and the manifest's
``sample_graph`` is ``"train"``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.importers import coerce, input_files
from saintpipe.services.dataset.csr import csr_to_symmetric
from saintpipe.services.dataset.importers.npz import load_npz
from saintpipe.services.dataset.layout import SPLITS, TRAIN_GRAPH_FILES, load_npy

log = logging.getLogger(__name__)

FILES = ("adj_full.npz", "adj_train.npz", "feats.npy", "class_map.json", "role.json")
# role.json's keys, by saintpipe split name.
ROLE_KEYS = {"train": "tr", "val": "va", "test": "te"}
_REPAIRABLE = ("not sorted ascending", "not symmetric")


def is_graphsaint_dir(directory: Path) -> bool:
    """Whether ``directory`` looks like a GraphSAINT dataset (it holds ``adj_full.npz``)."""
    return (directory / "adj_full.npz").is_file()


def read_adjacency(path: Path, num_nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The CSR structure of a scipy ``save_npz`` file: (indptr int64 [N+1], indices int32).

    Raises:
        DatasetError: not an npz, a missing key, a format other than csr/csc, a non-square
            shape or one that disagrees with ``num_nodes``, a row pointer of the wrong length.
    """
    members = load_npz(path)
    for key in ("indptr", "indices", "shape"):
        if key not in members:
            raise DatasetError(f"{path}: missing array {key!r} (a scipy.sparse.save_npz file holds indptr, "
                               f"indices, data, shape, format; this one holds {', '.join(sorted(members)) or 'nothing'})")
    fmt = "csr"
    if "format" in members:
        value = members["format"].item() if members["format"].ndim == 0 else members["format"].tolist()
        fmt = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
        if fmt not in ("csr", "csc"):
            raise DatasetError(f"{path}[format]: sparse format {fmt!r} is not read; save the matrix as CSR "
                               "(scipy.sparse.save_npz(path, matrix.tocsr()))")
    shape = members["shape"]
    if shape.shape != (2,) or shape.dtype.kind not in "iu":
        raise DatasetError(f"{path}[shape]: expected two integers, got {shape.dtype} {shape.shape}")
    rows, cols = int(shape[0]), int(shape[1])
    if rows != cols or rows < 1:
        raise DatasetError(f"{path}[shape]: ({rows}, {cols}) is not a square adjacency matrix")
    if num_nodes is not None and rows != num_nodes:
        raise DatasetError(f"{path}[shape]: ({rows}, {cols}), but adj_full.npz has {num_nodes} nodes")
    indptr = coerce.as_indptr(members["indptr"], f"{path}[indptr]")
    indices = coerce.as_indices(members["indices"], f"{path}[indices]")
    if indptr.size != rows + 1:
        raise DatasetError(f"{path}[indptr]: {indptr.size} entries, but shape ({rows}, {cols}) needs {rows + 1}")
    if "data" in members and members["data"].shape != indices.shape:
        raise DatasetError(f"{path}[data]: shape {members['data'].shape}, but indices has {indices.size} entries")
    if fmt == "csc":
        log.info("%s: a CSC matrix, read as the transposed CSR (the same graph when it is symmetric)", path)
    return indptr, indices


def _check_csr(indptr: np.ndarray, indices: np.ndarray, path: Path, symmetrize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Validated (or, with ``symmetrize``, repaired) CSR; an error on repairable problems suggests the flag."""
    if symmetrize:
        indptr, indices = csr_to_symmetric(indptr, indices, where=str(path))
    try:
        checks.check_topology(indptr, indices, symmetric=True, where=f"{path}[indices]", indptr_where=f"{path}[indptr]")
    except DatasetError as exc:
        if any(word in str(exc) for word in _REPAIRABLE):
            raise DatasetError(f"{exc} (--symmetrize sorts and symmetrizes both adjacencies)") from None
        raise
    return indptr, indices


def _load_json(path: Path) -> object:
    input_files.require_file(path, "a JSON file")
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not UTF-8 text (is it a binary file?)") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None


def _fits_int64(text: str) -> bool:
    try:
        return -(2**63) <= int(text) < 2**63
    except ValueError:
        return False


def _node_ids(keys: list[str], path: Path, n: int) -> np.ndarray:
    """class_map's keys as node ids: integers, in range, each node once."""
    try:
        ids = np.fromiter((int(k) for k in keys), dtype=np.int64, count=len(keys))
    except (ValueError, OverflowError):
        bad = next(k for k in keys if not _fits_int64(k))
        raise DatasetError(f"{path}: key {bad[:40]!r} is not a node id (an integer)") from None
    if ids.size and (outside := np.flatnonzero((ids < 0) | (ids >= n))).size:
        raise DatasetError(f"{path}: node id {int(ids[outside[0]])} is out of range: adj_full.npz has {n} nodes")
    seen = np.bincount(ids, minlength=n)
    if (dup := np.flatnonzero(seen > 1)).size:
        raise DatasetError(f"{path}: node {int(dup[0])} appears more than once (keys {', '.join(repr(k) for k in keys if int(k) == dup[0])})")
    if (absent := np.flatnonzero(seen == 0)).size:
        raise DatasetError(f"{path}: node {int(absent[0])} has no class ({ids.size:,} of {n:,} nodes are listed; "
                           "every node needs one)")
    return ids


def read_class_map(path: Path, n: int) -> np.ndarray:
    """Labels from class_map.json: int64 [N] class ids, or uint8 [N, C] for lists of 0/1."""
    class_map = _load_json(path)
    if not isinstance(class_map, dict):
        raise DatasetError(f"{path}: expected an object mapping node id to class, got a JSON {type(class_map).__name__}")
    keys = list(class_map)
    ids = _node_ids(keys, path, n)
    values = list(class_map.values())
    if isinstance(values[0], list):
        width = len(values[0])
        if width == 0:
            raise DatasetError(f"{path}: class of node {keys[0]} is an empty list (multi-label rows need a 0/1 "
                               "per class)")
        for key, value in zip(keys, values):
            if not isinstance(value, list) or len(value) != width:
                raise DatasetError(f"{path}: class of node {key} is {json.dumps(value)[:40]}; node {keys[0]} has a "
                                   f"list of {width} (multi-label rows are lists of the same length)")
        rows = np.array(values)
        if rows.dtype.kind not in "iu":  # floats, strings, nulls or bools somewhere
            key = next(k for k, value in zip(keys, values) if any(type(v) is not int for v in value))  # noqa: E721
            raise DatasetError(f"{path}: class of node {key} is {json.dumps(class_map[key])[:40]}: a multi-label "
                               "row holds only 0 and 1")
        if (bad := np.flatnonzero(((rows != 0) & (rows != 1)).any(axis=1))).size:
            key = keys[bad[0]]
            raise DatasetError(f"{path}: class of node {key} is {json.dumps(class_map[key])[:40]}: a multi-label "
                               "row holds only 0 and 1")
        labels: np.ndarray = np.zeros((n, width), dtype=np.uint8)
        labels[ids] = rows
        return labels
    for key, value in zip(keys, values):
        if type(value) is not int:  # noqa: E721 - bools, floats and strings are not class ids
            raise DatasetError(f"{path}: class of node {key} is {json.dumps(value)[:40]}, expected an integer "
                               "class id (or a list of 0/1 for multi-label)")
    labels = np.empty(n, dtype=np.int64)
    try:
        labels[ids] = np.array(values, dtype=np.int64)
    except OverflowError:
        raise DatasetError(f"{path}: a class id does not fit a 64-bit integer") from None
    return labels


def read_roles(path: Path, n: int) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The splits from role.json (``tr``, ``va``, ``te``), sorted; and each one's name for errors."""
    roles = _load_json(path)
    if not isinstance(roles, dict):
        raise DatasetError(f"{path}: expected an object with keys tr, va, te, got a JSON {type(roles).__name__}")
    splits, where = {}, {}
    for split in SPLITS:
        key = ROLE_KEYS[split]
        where[split] = f"{path}[{key!r}]"
        if key not in roles:
            raise DatasetError(f"{path}: missing key {key!r} (expected tr, va, te: lists of node ids)")
        value = roles[key]
        if not isinstance(value, list):
            raise DatasetError(f"{where[split]}: expected a list of node ids, got a JSON {type(value).__name__}")
        if bad := [v for v in value if type(v) is not int][:1]:  # noqa: E721 - bools are not node ids
            raise DatasetError(f"{where[split]}: {json.dumps(bad[0])[:40]} is not a node id (an integer)")
        try:
            splits[split] = np.sort(np.array(value, dtype=np.int64))
        except OverflowError:
            raise DatasetError(f"{where[split]}: a node id does not fit a 64-bit integer") from None
    if splits["train"].size == 0:
        raise DatasetError(f"{where['train']}: lists no node; training needs some")
    return splits, where


@njit(cache=True)
def _first_absent(a_indptr, a_indices, b_indptr, b_indices, mask):
    """The first entry (u, v) of graph a with mask[u] and mask[v] that graph b lacks, or (-1, -1).

    Both graphs have sorted rows, so each row is one merge walk; no memory beyond the inputs.
    """
    for u in range(a_indptr.size - 1):
        if not mask[u]:
            continue
        k = b_indptr[u]
        end = b_indptr[u + 1]
        for j in range(a_indptr[u], a_indptr[u + 1]):
            v = a_indices[j]
            if not mask[v]:
                continue
            while k < end and b_indices[k] < v:
                k += 1
            if k == end or b_indices[k] != v:
                return u, v
    return -1, -1


def train_graph(t_indptr: np.ndarray, t_indices: np.ndarray, indptr: np.ndarray, indices: np.ndarray,
                train: np.ndarray, path: Path, full_path: Path) -> dict[str, np.ndarray]:
    """adj_train (global ids, checked) as the training graph's files: a CSR over local ids, and the nodes.

    Raises:
        DatasetError: an edge of adj_train touches a node outside ``train`` or is absent from adj_full, or
            adj_full has an edge between training nodes that adj_train lacks.
    """
    n = t_indptr.size - 1
    mask = np.zeros(n, dtype=np.uint8)
    mask[train] = 1
    if (rows := np.flatnonzero((np.diff(t_indptr) > 0) & (mask == 0))).size:
        u = int(rows[0])
        raise DatasetError(f"{path}: edge ({u}, {int(t_indices[t_indptr[u]])}) touches node {u}, which is not a "
                           "training node (role.json 'tr')")
    if (cols := np.flatnonzero(mask[t_indices] == 0)).size:
        u, v = int(np.searchsorted(t_indptr, cols[0], side="right") - 1), int(t_indices[cols[0]])
        raise DatasetError(f"{path}: edge ({u}, {v}) touches node {v}, which is not a training node (role.json 'tr')")
    u, v = _first_absent(t_indptr, t_indices, indptr, indices, mask)
    if u >= 0:
        raise DatasetError(f"{path}: edge ({u}, {v}) is absent from {full_path.name}")
    # The training graph is the graph the training nodes induce (GraphSAINT: "the edges between training
    # nodes"); `data verify` rebuilds it from adj_full and compares, so a thinner adj_train is refused here.
    u, v = _first_absent(indptr, indices, t_indptr, t_indices, mask)
    if u >= 0:
        raise DatasetError(f"{path}: lacks edge ({u}, {v}) of {full_path.name} between training nodes {u} and {v} "
                           "(adj_train must hold every edge among the training nodes of role.json 'tr')")
    # Rows outside ``train`` are empty (checked), so the entries are already in local row order.
    local = np.full(n, -1, dtype=np.int32)
    local[train] = np.arange(train.size, dtype=np.int32)
    return {
        TRAIN_GRAPH_FILES["indptr"]: np.append(t_indptr[train], t_indptr[-1]).astype(np.int64),
        TRAIN_GRAPH_FILES["indices"]: local[t_indices],
        TRAIN_GRAPH_FILES["nodes"]: train.astype(np.int64),
    }


def import_graphsaint(directory: Path | str, *, name: str | None = None, symmetrize: bool = False,
                      max_classes: int = checks.DEFAULT_MAX_CLASSES) -> dict[str, Any]:
    """Read a GraphSAINT dataset directory into ``write_dataset`` arguments, the training graph included.

    Args:
        directory: the directory holding :data:`FILES`.
        name: dataset name (default: the directory's name).
        symmetrize: sort, deduplicate and symmetrize both adjacencies instead of refusing them.
        max_classes: refuse labels that imply more classes (``--max-classes``).

    Returns:
        ``write_dataset`` arguments with ``extra`` holding the training graph files and
        ``sample_graph="train"``.

    Raises:
        DatasetError: naming the file and the key, field or node id at fault.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(f"{directory}: not a directory (a GraphSAINT dataset is a directory holding "
                           f"{', '.join(FILES)})")
    if missing := [f for f in FILES if not (directory / f).exists()]:
        raise DatasetError(f"{directory}: not a complete GraphSAINT dataset: missing {', '.join(missing)}")
    full_path, train_path = directory / "adj_full.npz", directory / "adj_train.npz"
    indptr, indices = _check_csr(*read_adjacency(full_path), full_path, symmetrize)
    n = indptr.size - 1
    t_indptr, t_indices = _check_csr(*read_adjacency(train_path, n), train_path, symmetrize)

    feats_path = directory / "feats.npy"
    header = input_files.npy_file_header(feats_path)
    if len(header.shape) != 2 or header.shape[0] != n:
        raise DatasetError(f"{feats_path}: shape {header.shape}, but adj_full.npz has {n} nodes (expected ({n}, F))")
    features = coerce.as_features(load_npy(feats_path), str(feats_path))
    checks.check_features(features, n, where=str(feats_path))

    labels_path = directory / "class_map.json"
    labels = read_class_map(labels_path, n)
    checks.check_labels(labels, n, where=str(labels_path), max_classes=max_classes)
    splits, where = read_roles(directory / "role.json", n)
    checks.check_splits(splits, labels, n, where=where)

    extra = train_graph(t_indptr, t_indices, indptr, indices, splits["train"], train_path, full_path)
    log.info("GraphSAINT %s: %d nodes, %d directed edges; training graph %d nodes, %d directed edges",
             directory, n, indices.size, splits["train"].size, t_indices.size)
    return {
        "name": name or directory.resolve().name,
        "indptr": indptr,
        "indices": indices,
        "features": features,
        "labels": labels,
        "splits": splits,
        "extra": extra,
        "sample_graph": "train",
        "source": f"imported from GraphSAINT directory {directory.name}"
                  + (" (adjacency symmetrized)" if symmetrize else ""),
    }
