"""The files of the oriented lists stored with a dataset, readable without the sampler kernels.

``DATASET_DIR/oriented/<graph>/`` (``full`` or ``train``) holds one ``.npy``
file per array of the orientation (:class:`~saintpipe.services.sampler.kernels.oriented.Orientation`'s
fields, in order) and ``meta.json``: the checksums of the CSR files they were
built from, the sha256 of each of its files, and the sizes.
:mod:`saintpipe.services.dataset.oriented_store` builds and reuses them; this
module holds the names and the reader, for processes that only map them (the
sampler workers) and for ``saintpipe data verify``. Reading checks the
checksums and that every index lies in range, since the induction kernel reads
through them unchecked; an error names the file at fault.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.layout import TRAIN_GRAPH_FILES, load_npy
from saintpipe.services.dataset.manifest import check_file
from saintpipe.services.dataset.train_graph import stored_checksums

__all__ = ["FIELDS", "META", "ORIENTED_DIR", "check_ranges", "graph_sources", "orientation_dir", "read_orientation"]

log = logging.getLogger(__name__)

ORIENTED_DIR = "oriented"
META = "meta.json"
FIELDS = ("indptr", "columns", "forward", "reverse")  # one .npy file each, the orientation's fields in order


def orientation_dir(dataset_path: Path | str, graph_kind: str) -> Path:
    """Where the oriented lists of the dataset's graph ``graph_kind`` (``full`` or ``train``) are stored."""
    return Path(dataset_path) / ORIENTED_DIR / graph_kind


def graph_sources(dataset_path: Path | str, manifest: Any, graph_kind: str) -> dict[str, str] | None:
    """The recorded checksums of the CSR files of the dataset's graph ``graph_kind``; None when they are not
    stored (a training graph kept in memory)."""
    if graph_kind == "full":
        files, rels = manifest.files, ("indptr.npy", "indices.npy")
    else:
        files = stored_checksums(dataset_path, manifest) or {}
        rels = (TRAIN_GRAPH_FILES["indptr"], TRAIN_GRAPH_FILES["indices"])
    if any(rel not in files for rel in rels):
        return None
    return {rel: files[rel] for rel in rels}


def read_orientation(directory: Path, num_nodes: int, num_entries: int, *, sources: dict[str, str] | None = None,
                     verify: bool = True) -> tuple[np.ndarray, ...] | None:
    """The arrays of the oriented lists stored in ``directory`` (memory-mapped, in the order of ``FIELDS``);
    None when none are stored there, or (with ``sources``) when they were built from other CSR files.

    Args:
        num_nodes, num_entries: the graph's nodes and CSR entries, which the lists must match.
        verify: check each file's sha256 and every index's range (one pass over the files); False for the
            workers of a supervisor that just did.

    Raises:
        DatasetError: a file that is missing, torn, edited or holds an index out of range, naming it.
    """
    meta_path = directory / META
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        files, built_from = dict(meta["files"]), meta["sources"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{meta_path}: unreadable: {exc}") from None
    if sources is not None and built_from != sources:
        log.info("the oriented lists in %s were built from other CSR files: building them again", directory)
        return None
    if sorted(files) != sorted(f"{name}.npy" for name in FIELDS):
        raise DatasetError(f"{meta_path}: lists files {sorted(files)}, expected the four of an orientation")
    if verify:
        for rel, digest in files.items():
            check_file(directory / rel, digest, f"{meta_path} lists it")
    arrays = {name: load_npy(directory / f"{name}.npy") for name in FIELDS}
    position = np.int32 if num_entries < 2**31 else np.int64
    expect = {"indptr": (np.int64, num_nodes + 1), "columns": (np.int32, None), "forward": (position, None),
              "reverse": (position, None)}
    entries = int(arrays["columns"].size)
    for name, (dtype, size) in expect.items():
        arr = arrays[name]
        if arr.ndim != 1 or arr.dtype != dtype or arr.size != (entries if size is None else size):
            raise DatasetError(f"{directory / f'{name}.npy'}: must be 1-D {np.dtype(dtype)} of "
                               f"{entries if size is None else size} entries, got {arr.dtype} {arr.shape}")
    orientation = tuple(arrays[name] for name in FIELDS)
    if verify:
        field, at = check_ranges(*orientation, num_nodes, num_entries)  # type: ignore[call-arg]  # mypy: a starred list takes every later parameter
        if field >= 0:
            raise DatasetError(f"{directory / f'{FIELDS[field]}.npy'}: entry {at} is out of range for a graph "
                               f"of {num_nodes} nodes and {num_entries} entries")
    return orientation


@njit(cache=True)
def check_ranges(indptr, columns, forward, reverse, num_nodes, num_entries):
    """Whether stored lists are safe to hand to ``kernels.oriented.induce_oriented``, which does not check its indices:
    ``(-1, 0)``, or ``(array, position)`` of the first entry at fault (array 0 ``indptr``: not running from 0
    to ``columns.size`` without decreasing; 1 ``columns``: an id outside ``[0, num_nodes)``; 2 and 3
    ``forward`` and ``reverse``: a CSR position outside ``[0, num_entries)``). One pass, no allocation."""
    if indptr.size != num_nodes + 1 or indptr[0] != 0:
        return 0, 0
    for v in range(num_nodes):
        if indptr[v + 1] < indptr[v]:
            return 0, v + 1
    if indptr[num_nodes] != columns.size:
        return 0, num_nodes
    for s in range(columns.size):
        if columns[s] < 0 or columns[s] >= num_nodes:
            return 1, s
        if forward[s] < 0 or forward[s] >= num_entries:
            return 2, s
        if reverse[s] < 0 or reverse[s] >= num_entries:
            return 3, s
    return -1, 0
