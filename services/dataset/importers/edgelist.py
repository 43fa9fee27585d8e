"""Import an edge list (CSV/TSV/whitespace) with arbitrary node ids, plus optional side files.

Node ids are integers; a token that is not one is an error naming the file and
line. With ``string_ids`` (``--string-ids``) every id, in the edge list and the
side tables, is a string instead (``"7"`` and ``"07"`` are different nodes).
Ids are remapped to ``0..N-1`` in sorted id order and the original ids are
stored beside the dataset as ``node_ids.npy`` (row i = original id of node i;
int64, or fixed-width unicode for string ids; ``np.load`` reads it without pickle). The node set is every id in the edge list or in the
feature / label files (an id only there becomes an isolated node).

The graph is treated as undirected: edges are symmetrized, duplicates merged
and self loops dropped. Without a feature file each node gets the features
``[1, log(1 + degree)]``; without labels every node is class 0; without a
split, labelled nodes are split at random 60 / 20 / 20.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.importers import coerce, sidefiles, tabular
from saintpipe.services.dataset.params import SEED_BOUNDS, require
from saintpipe.services.dataset.csr import edges_to_csr
from saintpipe.services.dataset.importers.edge_stream import StreamUnsupported, stream_csr
from saintpipe.services.dataset.importers.id_map import IdMap
from saintpipe.services.dataset.kronecker import random_splits
from saintpipe.services.dataset.layout import SPLITS

log = logging.getLogger(__name__)


def _in_memory_graph(path: Path, fmt: tabular.TableFormat, string_ids: bool,
                     side_keys: list[np.ndarray]) -> tuple[IdMap, np.ndarray, np.ndarray]:
    """The graph read whole by numpy's parser: string ids, or a table too irregular to stream."""
    pairs = tabular.read_ids(path, fmt, (0, 1), string_ids)
    if pairs.shape[0] == 0:
        raise DatasetError(f"{path}: holds no edges")
    ids = IdMap.of([pairs[:, 0], pairs[:, 1], *side_keys])
    src, dst = ids.lookup(pairs[:, 0], str(path)), ids.lookup(pairs[:, 1], str(path))
    del pairs
    indptr, indices = edges_to_csr(src, dst, ids.ids.size, symmetrize=True)
    return ids, indptr, indices


def read_graph(path: Path, *, delimiter: str | None = None, header: bool | None = None, string_ids: bool = False,
               side_keys: list[np.ndarray] | None = None,
               scratch: Path | None = None) -> tuple[IdMap, np.ndarray, np.ndarray]:
    """An edge table's node ids and symmetrized CSR (indptr, indices), its ids the first two columns.

    Integer ids are streamed (:func:`~saintpipe.services.dataset.importers.edge_stream.stream_csr`): with
    ``scratch``, ``indices`` is a memory map of a file there (the caller keeps the directory until it
    is written); without, a temporary directory is used and ``indices`` comes back in memory.
    """
    fmt = tabular.sniff(path, delimiter=delimiter, header=header)
    if fmt.num_columns < 2:
        raise DatasetError(f"{path}: an edge list needs two columns (source, target), found {fmt.num_columns}")
    side_keys = side_keys or []
    if not string_ids:
        try:
            if scratch is not None:
                built = stream_csr(path, fmt, scratch, side_keys)
                return built.ids, built.indptr, built.indices
            with tempfile.TemporaryDirectory(prefix="saintpipe-import-") as tmp:
                built = stream_csr(path, fmt, Path(tmp), side_keys)
                return built.ids, built.indptr, np.array(built.indices)
        except StreamUnsupported as exc:
            log.info("%s; reading the table in memory instead", exc)
    return _in_memory_graph(path, fmt, string_ids, side_keys)


def _scatter(keyed: sidefiles.Keyed, ids: IdMap, n: int, fill, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Values of a keyed side file in dense node order; returns (array, has-a-row mask)."""
    rows = ids.lookup(keyed.keys, keyed.where)
    out = np.full((n, *keyed.values.shape[1:]), fill, dtype=dtype)
    out[rows] = keyed.values
    present = np.zeros(n, dtype=bool)
    present[rows] = True
    return out, present


def import_edgelist(
    edges: Path | str,
    *,
    features: Path | str | None = None,
    labels: Path | str | None = None,
    split: Path | str | None = None,
    train: Path | str | None = None,
    val: Path | str | None = None,
    test: Path | str | None = None,
    delimiter: str | None = None,
    header: bool | None = None,
    name: str | None = None,
    seed: int = 0,
    max_classes: int = checks.DEFAULT_MAX_CLASSES,
    string_ids: bool = False,
    scratch: Path | None = None,
) -> dict[str, Any]:
    """Read an edge list and its side files into arrays ready for ``write_dataset``.

    Args:
        edges: the edge table; the first two columns are source and target ids.
        features: ``.npy`` by id or a table ``id, f1, ...``; every node needs a row.
        labels: ``.npy`` by id or a table ``id, label`` (class id or name) or ``id, l1, ...`` (0/1);
            nodes without a row are unlabelled (-1).
        split: per-node split (``.npy`` codes or a table ``id, train|val|test|none``);
            or instead ``train``, ``val``, ``test``: one id list each.
        delimiter, header: override the table sniffing of the edge list.
        name: the dataset's name (default: the edge file's stem).
        seed: seed of the random split used when no split is given (``[0, 2**63 - 1]``).
        max_classes: refuse labels that imply more classes (``--max-classes``).
        string_ids: read every node id as a string (``--string-ids``); without it ids are integers.
        scratch: a directory for the streamed build's files (see :func:`read_graph`); the returned
            ``indices`` may map a file there, so keep it until the dataset is written.

    Returns:
        ``write_dataset`` arguments, with ``extra`` holding ``node_ids.npy``
        (and ``label_names.npy`` when labels were class names).

    Raises:
        DatasetError: naming the file and the line or node id at fault; without ``string_ids``, an id
            that is not an integer.
        InvalidArgument: a negative or too large ``seed``.
    """
    require("--seed", seed, SEED_BOUNDS, True)
    edges = Path(edges)
    paths = {k: Path(v) for k, v in (("features", features), ("labels", labels), ("split", split),
                                     ("train", train), ("val", val), ("test", test)) if v is not None}
    if "split" in paths and paths.keys() & {"train", "val", "test"}:
        raise DatasetError("give either a split file or train/val/test id lists, not both")
    if paths.keys() & {"train", "val", "test"} and not paths.keys() >= {"train", "val", "test"}:
        raise DatasetError("give all three of train, val and test id lists (or one split file)")
    feat = sidefiles.read_features(paths["features"], string_ids) if "features" in paths else None
    lab = sidefiles.read_labels(paths["labels"], string_ids) if "labels" in paths else None

    ids, indptr, indices = read_graph(edges, delimiter=delimiter, header=header, string_ids=string_ids,
                                      side_keys=[k.keys for k in (feat, lab) if k is not None], scratch=scratch)
    n = ids.ids.size
    log.info("edge list %s: %d nodes, %d directed edges after symmetrizing", edges, n, indices.size)

    if feat is not None:
        feat.values = coerce.as_features(feat.values, feat.where)
        x, present = _scatter(feat, ids, n, 0, feat.values.dtype)
        if not present.all():
            raise DatasetError(f"{feat.where}: no feature row for node id {sidefiles.show_id(ids.ids[np.flatnonzero(~present)[0]])}")
        checks.check_features(x, n, where=feat.where)
    else:
        x = np.stack([np.ones(n, dtype=np.float32), np.log1p(np.diff(indptr)).astype(np.float32)], axis=1)

    extra = {"node_ids.npy": ids.ids}
    if lab is not None:
        lab.values = coerce.as_labels(lab.values, lab.where)
        y, _ = _scatter(lab, ids, n, -1 if lab.values.ndim == 1 else 0, lab.values.dtype)
        checks.check_labels(y, n, where=lab.where, max_classes=max_classes)
        if lab.names is not None:
            extra["label_names.npy"] = lab.names
    else:
        log.warning("edge list %s: no labels given; every node gets class 0", edges)
        y = np.zeros(n, dtype=np.int64)

    splits, where = _read_splits(paths, ids, n, string_ids)
    if splits is None:
        labelled = np.flatnonzero(y >= 0) if y.ndim == 1 else np.arange(n)
        parts = random_splits(labelled.size, np.random.default_rng(seed))
        splits = {s: labelled[parts[s]] for s in SPLITS}
        where = "random split {name}"
    checks.check_splits(splits, y, n, where=where)
    return {
        "name": name or edges.stem,
        "indptr": indptr,
        "indices": indices,
        "features": x,
        "labels": y,
        "splits": splits,
        "extra": extra,
        "source": f"imported from edge list {edges.name}" + (" (string ids)" if string_ids else ""),
    }


def _read_splits(paths: dict[str, Path], ids: IdMap, n: int, string_ids: bool):
    if "split" in paths:
        keyed = sidefiles.read_split_codes(paths["split"], string_ids)
        # A .npy of codes covers ids 0..R-1; ids outside the graph may appear there only as "none".
        assigned = keyed.values != -1
        keyed.keys, keyed.values = keyed.keys[assigned], keyed.values[assigned]
        codes, _ = _scatter(keyed, ids, n, -1, np.int64)
        return coerce.split_from_codes(codes, keyed.where), keyed.where
    if "train" in paths:
        splits, where = {}, {}
        for s in SPLITS:
            keys, where[s] = sidefiles.read_id_list(paths[s], string_ids)
            splits[s] = np.sort(ids.lookup(keys, where[s]))
        return splits, where
    return None, None
