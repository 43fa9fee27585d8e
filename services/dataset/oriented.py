"""The graph's oriented lists (oriented induction, docs/explanation/sampler.md) stored with the dataset:
built once, mapped.

Building them reads the whole CSR twice and they are large, so they are stored in
``DATASET_DIR/oriented/<graph>/`` (``full`` or ``train``: the graph the samplers draw from), written
straight into their files once; every later start, the service's and each worker's on the host, maps them
read-only: one copy in the page cache, in clean pages the kernel may drop under pressure and read again
(Ray's object store, the alternative, is memory the kernel can neither write back nor drop).

The folder holds one ``.npy`` file per field of
:class:`~saintpipe.services.sampler.kernels.oriented.Orientation` and ``meta.json``: the checksums of the
CSR files they were built from, the sha256 of each of its files, and the sizes.
:func:`open_or_build_orientation` builds and reuses them; :func:`read_orientation` maps them for the
sampler workers and ``saintpipe data verify``, checking the checksums and that every index lies in range,
since the induction kernel reads through them unchecked. Lists built from other CSR files, or torn or
edited, are built again.
"""

from __future__ import annotations

import errno
import json
import logging
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
from numba import njit

from saintpipe.core.atomic import replacing_dir
from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.layout import TRAIN_GRAPH_FILES, load_npy
from saintpipe.services.dataset.manifest import check_file, sha256_file
from saintpipe.services.dataset.train_graph import stored_checksums
from saintpipe.services.sampler.kernels.oriented import Orientation, orient_graph

__all__ = ["FIELDS", "META", "ORIENTED_DIR", "check_ranges", "graph_sources", "open_or_build_orientation",
           "orientation_dir", "read_orientation"]

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


def _build_into(directory: Path, graph: Any, sources: dict[str, str]) -> bool:
    """Build the lists straight into files under ``directory`` (replaced atomically); False when the graph is
    not symmetric (nothing is stored). Raises OSError when the directory cannot be written."""

    def allocate(name: str, size: int, dtype: type) -> np.ndarray:
        if size == 0:  # nothing to map: saved below
            return np.empty(0, dtype=dtype)
        return np.lib.format.open_memmap(tmp / f"{name}.npy", mode="w+", dtype=dtype, shape=(size,))

    class _NotSymmetric(Exception):
        pass

    try:
        with replacing_dir(directory) as tmp:
            orientation = orient_graph(graph.indptr, graph.indices, allocate)
            if orientation is None:
                raise _NotSymmetric
            files = {}
            for name, arr in zip(FIELDS, orientation):
                target = tmp / f"{name}.npy"
                if isinstance(arr, np.memmap):
                    arr.flush()
                else:
                    np.save(target, arr, allow_pickle=False)
                files[target.name] = sha256_file(target)
            del orientation, arr
            meta = {"files": files, "sources": sources, "num_nodes": graph.num_nodes,
                    "num_entries": graph.num_edges}
            (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    except _NotSymmetric:
        return False
    return True


def open_or_build_orientation(dataset: Any, graph: Any) -> tuple[Orientation | None, Path | None]:
    """The oriented lists of the sampled ``graph`` (a :class:`~saintpipe.services.dataset.sample_graph.SampleGraph`
    of the opened ``dataset``) and the directory they are stored in: the stored ones, else built now into
    that directory. ``(lists in memory, None)`` when they cannot be stored (a read-only dataset, a training
    graph kept in memory); ``(None, None)`` when the graph is not symmetric (induction then scans whole rows
    and reports the asymmetry)."""
    sources = graph_sources(dataset.path, dataset.manifest, graph.kind) if graph.stored else None
    if sources is None:
        return orient_graph(graph.indptr, graph.indices), None
    directory = orientation_dir(dataset.path, graph.kind)
    try:
        stored = read_orientation(directory, graph.num_nodes, graph.num_edges, sources=sources)
    except DatasetError as exc:
        log.warning("the stored oriented lists are unusable (%s): building them again", exc)
        stored = None
    if stored is not None:
        stored = Orientation(*stored)
        log.info("oriented lists from %s (%.0f MB)", directory, stored.nbytes / 1e6)
        return stored, directory
    began = time.monotonic()
    try:
        if not _build_into(directory, graph, sources):
            return None, None
    except OSError as exc:
        # A dataset mounted read-only (docker-compose.yml does so) is deliberate: said once, not warned about.
        level = logging.INFO if exc.errno == errno.EROFS else logging.WARNING
        log.log(level, "cannot store the oriented lists in %s (%s): building them in memory", directory,
                exc.strerror or exc)
        return orient_graph(graph.indptr, graph.indices), None
    # Just written: there (read_orientation's None is for a directory without them).
    arrays = cast(tuple[np.ndarray, ...], read_orientation(directory, graph.num_nodes, graph.num_edges, verify=False))
    stored = Orientation(*arrays)
    log.info("oriented the graph for induction in %.1f s (%.0f MB), stored in %s", time.monotonic() - began,
             stored.nbytes / 1e6, directory)
    return stored, directory
