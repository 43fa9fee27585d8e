"""The graph's oriented lists (oriented induction, docs/sampler.md) stored with the dataset: built once, mapped.

Building them reads the whole CSR twice (about 22 s at Kronecker scale 24)
and they hold 1.74 GB there. The sampler service used to build them at every
start and hand them to its workers through Ray's object store, shared memory
the kernel can neither write back nor drop. Stored in
``DATASET_DIR/oriented/<graph>/`` (``full`` or ``train``: the graph the
samplers draw from), they are written straight into their files once, and
every later start, the service's and each worker's on the host, maps them
read-only: one copy in the page cache, in clean pages the kernel may drop
under pressure and read again.

The files, their ``meta.json`` and the checks made on opening them are
:mod:`saintpipe.services.dataset.oriented_files`'s; lists built from other
CSR files, or torn or edited, are built again here.
"""

from __future__ import annotations

import errno
import json
import logging
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from saintpipe.core.atomic import replacing_dir
from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.manifest import sha256_file
from saintpipe.services.dataset.oriented_files import (FIELDS, META, graph_sources, orientation_dir,
                                                        read_orientation)
from saintpipe.services.sampler.kernels.oriented import Orientation, orient_graph

__all__ = ["open_or_build_orientation"]

log = logging.getLogger(__name__)


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
