"""The training graph: the subgraph induced by the training nodes, with its own CSR and id map.

GraphSAINT's inductive protocol (its datasets ship ``adj_train.npz``) draws subgraphs from the graph
induced by the training nodes, so validation and test nodes are never seen in training. This module
builds that graph for any dataset, stores it once with the dataset and opens it again (memory-mapped)::

    train_graph/indptr.npy   int64 [n+1]
    train_graph/indices.npy  int32 [e], local ids, sorted neighbour lists (symmetric when the graph is)
    train_graph/nodes.npy    int64 [n], the global id of local node i, ascending
    train_graph/meta.json    checksums of the three files, and of the dataset files it was built from

Every training node is in it, isolated ones included. Local ids follow the global order, so neighbour
lists stay sorted and mapping a sorted node set back to global ids keeps it sorted. A GraphSAINT import
ships the files itself, listed in the manifest; a graph built here records in ``meta.json`` the
checksums of the dataset files it came from, so a torn or edited file, or a dataset rewritten under it,
is detected when it is opened.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
from numba import njit

from saintpipe.core.atomic import replacing_dir
from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.layout import TRAIN_GRAPH_DIR, TRAIN_GRAPH_FILES, load_npy
from saintpipe.services.dataset.manifest import Manifest, check_file, read_manifest, sha256_file

__all__ = ["META_NAME", "TrainGraph", "build_train_graph", "induced_degrees", "load_train_graph", "stored_checksums",
           "open_or_build", "store_train_graph", "verify_train_graph"]

log = logging.getLogger(__name__)

META_NAME = f"{TRAIN_GRAPH_DIR}/meta.json"
# The dataset files a training graph is derived from; meta.json records their manifest checksums.
_SOURCES = ("indptr.npy", "indices.npy", "split/train.npy")


@dataclass(frozen=True)
class TrainGraph:
    """The training graph: CSR over local ids and the local-to-global map.

    Attributes:
        indptr: int64 [n+1]; indices: int32 [e] local ids; nodes: int64 [n] global ids, ascending.
        where: the folder it was read from, or ``"memory"`` when it could not be stored.
    """

    indptr: np.ndarray
    indices: np.ndarray
    nodes: np.ndarray
    where: str = "memory"

    @property
    def num_nodes(self) -> int:
        return int(self.nodes.size)

    @property
    def num_edges(self) -> int:
        return int(self.indices.size)

    @property
    def stored(self) -> bool:
        """Whether it lies in the dataset directory (where trainers inducing node sets read it)."""
        return self.where != "memory"

    def to_local(self, ids: np.ndarray) -> np.ndarray | None:
        """Local ids (int64) of the global ``ids``, or None when one of them is not a training node."""
        ids = np.asarray(ids, dtype=np.int64)
        local = np.searchsorted(self.nodes, ids)
        if ids.size and (int(local.max()) >= self.num_nodes or not np.array_equal(self.nodes[local], ids)):
            return None
        return local


@njit(cache=True)
def _count_kept(indptr, indices, nodes, g2l, counts):
    """counts[i] = neighbours of nodes[i] that are training nodes (g2l >= 0)."""
    for i in range(nodes.size):
        v = nodes[i]
        c = 0
        for k in range(indptr[v], indptr[v + 1]):
            c += g2l[indices[k]] >= 0
        counts[i] = c


@njit(cache=True)
def _fill_kept(indptr, indices, nodes, g2l, sub_indptr, sub_indices):
    """Row i of the training graph: the local ids of nodes[i]'s training neighbours, in order."""
    for i in range(nodes.size):
        v = nodes[i]
        p = sub_indptr[i]
        for k in range(indptr[v], indptr[v + 1]):
            u = g2l[indices[k]]
            if u >= 0:
                sub_indices[p] = u
                p += 1


def _global_to_local(num_nodes: int, nodes: np.ndarray) -> np.ndarray:
    g2l = np.full(num_nodes, -1, dtype=np.int32)
    g2l[nodes] = np.arange(nodes.size, dtype=np.int32)
    return g2l


def _training_nodes(train_nodes: np.ndarray, num_nodes: int) -> np.ndarray:
    nodes = np.unique(np.asarray(train_nodes, dtype=np.int64))
    if nodes.size == 0:
        raise DatasetError("the train split is empty: there is no training graph to sample from")
    if nodes[0] < 0 or nodes[-1] >= num_nodes:
        raise DatasetError(f"train split: node id {int(nodes[0] if nodes[0] < 0 else nodes[-1])} is out of "
                           f"range [0, {num_nodes})")
    return nodes


def build_train_graph(indptr: np.ndarray, indices: np.ndarray, train_nodes: np.ndarray) -> TrainGraph:
    """The graph induced by ``train_nodes`` on the CSR ``(indptr, indices)``, in memory.

    Args:
        indptr, indices: the full graph (int64 / int32, sorted neighbour lists); memory maps are read in place.
        train_nodes: the training node ids (any order; duplicates merged).

    Raises:
        DatasetError: an empty training split, or ids out of range.
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    nodes = _training_nodes(train_nodes, indptr.size - 1)
    g2l = _global_to_local(indptr.size - 1, nodes)
    sub_indptr = np.zeros(nodes.size + 1, dtype=np.int64)
    _count_kept(indptr, indices, nodes, g2l, sub_indptr[1:])
    np.cumsum(sub_indptr, out=sub_indptr)
    sub_indices = np.empty(int(sub_indptr[-1]), dtype=np.int32)
    _fill_kept(indptr, indices, nodes, g2l, sub_indptr, sub_indices)
    return TrainGraph(indptr=sub_indptr, indices=sub_indices, nodes=nodes)


def induced_degrees(indptr: np.ndarray, indices: np.ndarray, train_nodes: np.ndarray) -> np.ndarray:
    """int64 [N]: each training node's degree in the training graph, 0 for the other nodes.

    The first pass of :func:`build_train_graph` alone (no CSR is built): what a trainer needs for the
    self-loop of nodes sampled from the training graph.
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    num_nodes = indptr.size - 1
    nodes = _training_nodes(train_nodes, num_nodes)
    counts = np.zeros(nodes.size, dtype=np.int64)
    _count_kept(indptr, np.ascontiguousarray(indices, dtype=np.int32), nodes,
                _global_to_local(num_nodes, nodes), counts)
    out = np.zeros(num_nodes, dtype=np.int64)
    out[nodes] = counts
    return out


# --- stored with the dataset ---------------------------------------------------------------------------------

def _listed_in_manifest(manifest: Manifest) -> bool:
    return all(rel in manifest.files for rel in TRAIN_GRAPH_FILES.values())


def stored_checksums(path: Path | str, manifest: Manifest) -> dict[str, str] | None:
    """The recorded sha256 of each stored training graph file (manifest or meta.json), by path relative to the
    dataset; None when none is stored.

    Raises:
        DatasetError: a meta.json that is unreadable, or was made from other dataset files (stale).
    """
    path = Path(path)
    if _listed_in_manifest(manifest):
        return {rel: manifest.files[rel] for rel in TRAIN_GRAPH_FILES.values()}
    meta_path = path / META_NAME
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        files, sources = dict(meta["files"]), dict(meta["sources"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{meta_path}: unreadable: {exc}") from None
    stale = [rel for rel in _SOURCES if sources.get(rel) != manifest.files.get(rel)]
    if stale:
        raise DatasetError(f"{meta_path}: built from other dataset files than these ({', '.join(stale)} changed); "
                           f"remove {path / TRAIN_GRAPH_DIR} to rebuild it")
    if sorted(files) != sorted(TRAIN_GRAPH_FILES.values()):
        raise DatasetError(f"{meta_path}: files lists {sorted(files)}, expected {sorted(TRAIN_GRAPH_FILES.values())}")
    return files


def load_train_graph(path: Path | str, manifest: Manifest | None = None, *,
                     checksums: bool = True) -> TrainGraph | None:
    """The training graph stored in dataset directory ``path`` (memory-mapped), or None when none is stored.

    Args:
        path: the dataset directory.
        manifest: its manifest (read when not given).
        checksums: hash the three files against the recorded sha256 (one pass over them); False for
            processes whose parent just checked them.

    Raises:
        DatasetError: a file that is missing, torn, edited or inconsistent, naming it.
    """
    path = Path(path)
    manifest = manifest if manifest is not None else read_manifest(path)
    expected = stored_checksums(path, manifest)
    if expected is None:
        return None
    if checksums:
        for rel, digest in expected.items():
            check_file(path / rel, digest, "the training graph lists it")
    arrays = {name: load_npy(path / rel) for name, rel in TRAIN_GRAPH_FILES.items()}
    graph = TrainGraph(indptr=arrays["indptr"], indices=arrays["indices"], nodes=arrays["nodes"],
                       where=str(path / TRAIN_GRAPH_DIR))
    _check_shapes(path, graph, manifest.num_nodes)
    return graph


def _check_shapes(path: Path, graph: TrainGraph, num_nodes: int) -> None:
    """The cheap invariants every reader relies on (dtypes, lengths, ids within the dataset)."""
    where = {name: path / rel for name, rel in TRAIN_GRAPH_FILES.items()}
    for name, dtype in (("indptr", np.int64), ("indices", np.int32), ("nodes", np.int64)):
        arr = getattr(graph, name)
        if arr.ndim != 1 or arr.dtype != dtype:
            raise DatasetError(f"{where[name]}: must be 1-D {np.dtype(dtype)}, got {arr.dtype} {arr.shape}")
    n = graph.num_nodes
    if n < 1 or graph.indptr.size != n + 1:
        raise DatasetError(f"{where['indptr']}: {graph.indptr.size} entries for {n} nodes in {where['nodes']}")
    if graph.indptr[0] != 0 or graph.indptr[-1] != graph.num_edges:
        raise DatasetError(f"{where['indptr']}: must run from 0 to {graph.num_edges} (the entries of indices.npy)")
    if graph.nodes[0] < 0 or graph.nodes[-1] >= num_nodes:
        raise DatasetError(f"{where['nodes']}: ids must lie in [0, {num_nodes}) (the dataset's nodes)")


def store_train_graph(path: Path | str, graph: TrainGraph, manifest: Manifest | None = None) -> TrainGraph:
    """Write ``graph`` to ``path/train_graph/`` atomically and return it memory-mapped from there.

    Raises:
        OSError: the dataset directory is not writable (the caller decides what to do).
    """
    path = Path(path)
    manifest = manifest if manifest is not None else read_manifest(path)
    if _listed_in_manifest(manifest):
        raise DatasetError(f"{path / TRAIN_GRAPH_DIR}: shipped with the dataset (listed in its manifest); "
                           "it is never replaced")
    with replacing_dir(path / TRAIN_GRAPH_DIR) as tmp:
        files = {}
        for name, rel in TRAIN_GRAPH_FILES.items():
            target = tmp / Path(rel).name
            np.save(target, np.ascontiguousarray(getattr(graph, name)), allow_pickle=False)
            files[rel] = sha256_file(target)
        meta = {"files": files, "sources": {rel: manifest.files.get(rel) for rel in _SOURCES},
                "num_nodes": graph.num_nodes, "num_edges": graph.num_edges}
        (tmp / Path(META_NAME).name).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    # Just written: it is there (load_train_graph's None is for a directory without one).
    return cast(TrainGraph, load_train_graph(path, manifest, checksums=False))


def open_or_build(dataset) -> TrainGraph:
    """The dataset's training graph: the stored one, else built now and stored (kept in memory, logged, when
    the dataset directory is read-only).

    Args:
        dataset: an opened :class:`~saintpipe.services.dataset.store.Dataset`.

    Raises:
        DatasetError: a training graph shipped with the dataset that is torn or edited; an empty train split.
            (One built here that is torn, edited or stale is built again, with a warning.)
    """
    try:
        stored = load_train_graph(dataset.path, dataset.manifest)
    except DatasetError as exc:
        if _listed_in_manifest(dataset.manifest):  # shipped with the dataset: nothing to rebuild it from
            raise
        log.warning("the stored training graph is unusable (%s): building it again", exc)
        stored = None
    if stored is not None:
        log.info("training graph from %s: %d nodes, %d edges", stored.where, stored.num_nodes, stored.num_edges)
        return stored
    start = time.perf_counter()
    graph = build_train_graph(dataset.indptr, dataset.indices, dataset.splits["train"])
    took = time.perf_counter() - start
    try:
        graph = store_train_graph(dataset.path, graph, dataset.manifest)
    except OSError as exc:
        log.warning("built the training graph (%d nodes, %d edges) in %.2f s but cannot store it in %s (%s): "
                    "keeping it in memory; trainers then get whole subgraphs", graph.num_nodes, graph.num_edges,
                    took, dataset.path / TRAIN_GRAPH_DIR, exc.strerror or exc)
        return graph
    log.info("built the training graph (%d of %d nodes, %d of %d edges) in %.2f s; stored in %s", graph.num_nodes,
             dataset.num_nodes, graph.num_edges, dataset.num_edges, took, graph.where)
    return graph


def verify_train_graph(path: Path | str, manifest: Manifest, indptr: np.ndarray, indices: np.ndarray,
                       train_nodes: np.ndarray, *, checksums: bool = True) -> TrainGraph | None:
    """Check a stored training graph completely (``saintpipe data verify``); None when there is none.

    Checks the checksums (unless ``checksums`` is false), then that ``nodes`` are exactly the training nodes
    (sorted, distinct, in range) and that the CSR holds exactly the edges the full graph induces on them, in
    sorted order (which makes it symmetric when the full graph is).

    Raises:
        DatasetError: the first problem found, naming the file at fault.
    """
    path = Path(path)
    graph = load_train_graph(path, manifest, checksums=checksums)
    if graph is None:
        return None
    where = {name: path / rel for name, rel in TRAIN_GRAPH_FILES.items()}
    want = build_train_graph(indptr, indices, train_nodes)
    if graph.nodes.shape != want.nodes.shape or not np.array_equal(graph.nodes, want.nodes):
        if graph.nodes.size > 1 and (np.diff(graph.nodes) <= 0).any():
            raise DatasetError(f"{where['nodes']}: ids are not strictly ascending")
        missing = np.setdiff1d(want.nodes, graph.nodes)
        what = (f"training node {int(missing[0])} is missing" if missing.size else
                f"node {int(np.setdiff1d(graph.nodes, want.nodes)[0])} is not a training node")
        raise DatasetError(f"{where['nodes']}: must list exactly the {want.num_nodes} training nodes: {what}")
    if not np.array_equal(graph.indptr, want.indptr):
        row = int(np.flatnonzero(graph.indptr != want.indptr)[0]) - 1
        raise DatasetError(f"{where['indptr']}: row of training node {int(want.nodes[max(row, 0)])} has "
                           "another number of edges than the full graph induces")
    if not np.array_equal(graph.indices, want.indices):
        pos = int(np.flatnonzero(graph.indices != want.indices)[0])
        row = int(np.searchsorted(want.indptr, pos, side="right") - 1)
        raise DatasetError(f"{where['indices']}: neighbours of training node {int(want.nodes[row])} differ from "
                           "the edges the full graph induces on the training nodes")
    return graph
