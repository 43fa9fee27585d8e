"""Import OGB's raw node property prediction layout (ogbn-arxiv, -products, -proteins, ...).

The directory is what OGB downloads and unzips (``dataset/ogbn_arxiv/``)::

    raw/edge.csv.gz            src,dst per line, no header (directed: symmetrized here)
    raw/node-feat.csv.gz       F comma-separated numbers per line, line i = node i (optional)
    raw/node-label.csv.gz      one class id per line (empty or nan = unlabelled, -1),
                               or C columns of 0/1 (multi-label, ogbn-proteins)
    raw/num-node-list.csv.gz   the node count (optional)
    split/<name>/train.csv.gz, valid.csv.gz, test.csv.gz      one node id per line

Uncompressed ``.csv`` files are read too. Files are read in blocks
(:mod:`~saintpipe.services.dataset.importers.csv_tables`), and errors name the file and
line. The node count comes from ``num-node-list``, else the feature rows, else
the label rows; the others must agree with it. Edges are symmetrized,
duplicates merged and self loops dropped, as for edge lists; without
``node-feat`` each node gets the features ``[1, log(1 + degree)]``.
Heterogeneous datasets (ogbn-mag: ``raw/relations/``) are not read.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.dataset.importers.csv_tables import MISSING, first_line_fields, read_float_table, read_int_table
from saintpipe.services.dataset.layout import SPLITS

log = logging.getLogger(__name__)

# OGB's split file names, by saintpipe split name.
SPLIT_FILES = {"train": "train", "val": "valid", "test": "test"}


def find(directory: Path, stem: str) -> Path | None:
    """``DIR/STEM.csv.gz`` or ``DIR/STEM.csv``, whichever exists (the compressed one first)."""
    for suffix in (".csv.gz", ".csv"):
        if (path := directory / f"{stem}{suffix}").exists():
            return path
    return None


def is_ogb_dir(directory: Path) -> bool:
    """Whether ``directory`` looks like OGB's raw node property prediction layout."""
    return find(directory / "raw", "edge") is not None


def split_names(directory: Path) -> list[str]:
    """The names of the splits under ``DIR/split/``, sorted."""
    split_dir = directory / "split"
    return sorted(p.name for p in split_dir.iterdir() if p.is_dir()) if split_dir.is_dir() else []


def _pick_split(directory: Path, split_name: str | None) -> str:
    names = split_names(directory)
    if not names:
        raise DatasetError(f"{directory / 'split'}: no split found (OGB datasets ship "
                           "split/<name>/{train,valid,test}.csv.gz)")
    if split_name is None:
        if len(names) > 1:
            raise DatasetError(f"{directory / 'split'}: holds several splits ({', '.join(names)}); "
                               "pick one with --split-name")
        return names[0]
    if split_name not in names:
        raise DatasetError(f"{directory / 'split'}: no split {split_name!r} (--split-name); "
                           f"there is {', '.join(names)}")
    return split_name


def _required(raw: Path, stem: str) -> Path:
    path = find(raw, stem)
    if path is None:
        raise DatasetError(f"{raw / (stem + '.csv.gz')}: file not found")
    return path


def _node_count(raw: Path) -> tuple[int | None, str | None]:
    path = find(raw, "num-node-list")
    if path is None:
        return None, None
    counts = read_int_table(path, 1)
    if counts.shape[0] != 1:
        raise DatasetError(f"{path}: lists {counts.shape[0]} graphs; a node property prediction dataset has one")
    n = int(counts[0, 0])
    if not 1 <= n < 2**31:
        raise DatasetError(f"{path}, line 1: node count {n} is not in [1, {2**31 - 1}]")
    return n, str(path)


def _check_rows(path: Path, rows: int, n: int, origin: str | None) -> None:
    if rows != n:
        raise DatasetError(f"{path}: {rows:,} lines, but {origin} says {n:,} nodes")


def _check_ids(path: Path, ids: np.ndarray, n: int, origin: str | None) -> None:
    """Every id of ``ids`` (one line per row) lies in [0, n); an error names the first line that does not."""
    if ids.size and int(ids.max()) >= n:
        line = int(np.flatnonzero((ids >= n).any(axis=1) if ids.ndim == 2 else ids >= n)[0])
        bad = int(ids[line].max()) if ids.ndim == 2 else int(ids[line])
        raise DatasetError(f"{path}, line {line + 1}: node id {bad:,} is out of range: {origin} says {n:,} nodes")


def _read_labels(path: Path) -> np.ndarray:
    """Class ids int64 [N] (-1 for empty or nan) or a 0/1 matrix uint8 [N, C]; errors name the line."""
    ncols = first_line_fields(path)
    if ncols == 0:
        raise DatasetError(f"{path}: holds no lines")
    values = read_int_table(path, ncols, allow_missing=ncols == 1)
    if ncols == 1:
        labels = values[:, 0]
        labels[labels == MISSING] = -1
        if (bad := np.flatnonzero(labels < -1)).size:
            raise DatasetError(f"{path}, line {bad[0] + 1}: label {labels[bad[0]]} (class ids are >= 0; an empty "
                               "line or nan marks an unlabelled node)")
        return labels
    if (bad := np.flatnonzero(((values != 0) & (values != 1)).any(axis=1))).size:
        row = values[bad[0]]
        col = int(np.flatnonzero((row != 0) & (row != 1))[0])
        raise DatasetError(f"{path}, line {bad[0] + 1}, column {col + 1}: {row[col]} in a multi-label row "
                           "(only 0 and 1)")
    return values.astype(np.uint8)


def import_ogb(directory: Path | str, *, split_name: str | None = None, name: str | None = None,
               max_classes: int = checks.DEFAULT_MAX_CLASSES) -> dict[str, Any]:
    """Read an OGB node property prediction directory into ``write_dataset`` arguments.

    Args:
        directory: the dataset directory (holding ``raw/`` and ``split/``).
        split_name: which ``split/<name>/`` to use (``--split-name``); default the only one.
        name: dataset name (default: the directory's name).
        max_classes: refuse labels that imply more classes (``--max-classes``).

    Raises:
        DatasetError: a missing or malformed file, an id out of range, counts that disagree,
            bad labels or splits; the message names the file and the line.
    """
    directory = Path(directory)
    raw = directory / "raw"
    if not raw.is_dir():
        raise DatasetError(f"{directory}: no raw/ directory (not an OGB dataset directory)")
    if find(raw, "edge") is None and ((raw / "relations").is_dir() or find(raw, "num-node-dict") is not None):
        raise DatasetError(f"{directory}: a heterogeneous OGB dataset (raw/relations/, as ogbn-mag); only "
                           "homogeneous node property prediction datasets are read")
    edge_path = _required(raw, "edge")
    label_path = _required(raw, "node-label")
    split = _pick_split(directory, split_name)

    n, origin = _node_count(raw)
    feat_path = find(raw, "node-feat")
    features = None
    if feat_path is not None:
        ncols = first_line_fields(feat_path)
        if ncols == 0:
            raise DatasetError(f"{feat_path}: holds no lines")
        features = read_float_table(feat_path, ncols)
        if n is None:
            n, origin = features.shape[0], str(feat_path)
        _check_rows(feat_path, features.shape[0], n, origin)
    labels = _read_labels(label_path)
    if n is None:
        n, origin = labels.shape[0], str(label_path)
    _check_rows(label_path, labels.shape[0], n, origin)
    if n < 1:
        raise DatasetError(f"{label_path}: holds no lines (no nodes)")

    pairs = read_int_table(edge_path, 2, dtype=np.int32)
    _check_ids(edge_path, pairs, n, origin)
    directed = pairs.shape[0]
    indptr, indices = edges_to_csr(pairs[:, 0], pairs[:, 1], n, symmetrize=True)
    del pairs
    log.info("OGB %s: %d nodes, %d edges in %s, %d directed entries after symmetrizing",
             directory, n, directed, edge_path.name, indices.size)

    if features is None:
        log.warning("OGB %s: no raw/node-feat.csv.gz; every node gets the features [1, log(1 + degree)]", directory)
        features = np.stack([np.ones(n, dtype=np.float32), np.log1p(np.diff(indptr)).astype(np.float32)], axis=1)
    else:
        checks.check_features(features, n, where=str(feat_path))
    checks.check_labels(labels, n, where=str(label_path), max_classes=max_classes)

    splits, where = {}, {}
    for ours in SPLITS:
        path = _required(directory / "split" / split, SPLIT_FILES[ours])
        ids = read_int_table(path, 1, dtype=np.int32)
        _check_ids(path, ids, n, origin)
        splits[ours], where[ours] = np.sort(ids[:, 0].astype(np.int64)), str(path)
    checks.check_splits(splits, labels, n, where=where)
    return {
        "name": name or directory.resolve().name,
        "indptr": indptr,
        "indices": indices,
        "features": features,
        "labels": labels,
        "splits": splits,
        "source": f"imported from OGB directory {directory.name} (split {split}; edges symmetrized)",
    }
