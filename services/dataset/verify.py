"""Full verification of a dataset directory: checksums, shapes, dtypes and graph invariants.

``open_dataset`` only checks what it needs to map the arrays; this module
checks everything a writer promised, so a corrupted copy or a hand-edited file
is caught before it feeds a training job. Every error names the file at fault.
"""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath

import numpy as np

from saintpipe.core.bars import ProgressBar
from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.manifest import Manifest, check_file, read_manifest
from saintpipe.services.dataset.layout import SPLITS, load_npy, shard_file
from saintpipe.services.dataset.train_graph import verify_train_graph

log = logging.getLogger(__name__)


def required_files(manifest: Manifest) -> list[str]:
    """The files every dataset holds, relative to its directory."""
    return [
        "indptr.npy",
        "indices.npy",
        "labels.npy",
        *(f"split/{s}.npy" for s in SPLITS),
        *(shard_file(k) for k in range(manifest.num_shards)),
    ]


def verify_checksums(path: Path, manifest: Manifest, progress: bool = False) -> None:
    """Every file the manifest lists exists and has the recorded sha256; every required file is listed."""
    for rel in required_files(manifest):
        if rel not in manifest.files:
            raise DatasetError(f"{path / 'manifest.json'}: lists no checksum for required file {rel}")
    for rel, digest in ProgressBar(sorted(manifest.files.items()), desc="checksums", unit="file",
                            disable=not progress, leave=False):
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts:
            raise DatasetError(f"{path / 'manifest.json'}: file entry {rel!r} points outside the dataset")
        check_file(path / rel, digest, "listed in the manifest", recorded="manifest",
                   damage="corrupted or was modified")


def _expect(path: Path, array: np.ndarray, shape: tuple[int, ...], dtypes: tuple[str, ...]) -> None:
    if array.shape != shape:
        raise DatasetError(f"{path}: shape {array.shape}, manifest says {shape}")
    if array.dtype.name not in dtypes:
        raise DatasetError(f"{path}: dtype {array.dtype}, expected {' or '.join(dtypes)}")


def verify_shard_ranges(path: Path, manifest: Manifest) -> None:
    """The shard ranges are contiguous, non-empty and cover [0, N) exactly."""
    expect = 0
    for k, (start, stop) in enumerate(manifest.shards):
        if start != expect or stop <= start:
            raise DatasetError(
                f"{path / 'manifest.json'}: shard {k} covers [{start}, {stop}); expected a non-empty range from {expect}"
            )
        expect = stop
    if expect != manifest.num_nodes:
        raise DatasetError(
            f"{path / 'manifest.json'}: shards cover [0, {expect}) but the graph has {manifest.num_nodes} nodes"
        )


def verify_class_count(path: Path, manifest: Manifest, labels: np.ndarray, max_classes: int) -> None:
    """The manifest's ``num_classes`` passes the bounds the labels passed (trainers size their output by it)."""
    at = f"{path / 'manifest.json'}: num_classes is {manifest.num_classes:,}"
    if manifest.num_classes > max_classes:
        raise DatasetError(f"{at}; at most {max_classes:,} are allowed (--max-classes)")
    if not manifest.multilabel:
        distinct = checks.distinct_labels(labels)
        if manifest.num_classes > checks.class_limit(distinct):
            raise DatasetError(f"{at} but labels.npy holds only {distinct:,} distinct labels (at most "
                               f"{checks.class_limit(distinct):,} classes are accepted for them)")


def _verify_orientations(path: Path, manifest, indptr: np.ndarray, indices: np.ndarray, train_graph) -> None:
    """The oriented lists stored with the dataset (``oriented/``), if any: their checksums and index ranges.
    Lists built from other CSR files are not checked (the next run builds them again)."""
    from saintpipe.services.dataset.oriented import graph_sources, orientation_dir, read_orientation

    graphs = {"full": (indptr, indices)}
    if train_graph is not None:
        graphs["train"] = (train_graph.indptr, train_graph.indices)
    for kind, (ptr, idx) in graphs.items():
        directory = orientation_dir(path, kind)
        sources = graph_sources(path, manifest, kind)
        if sources is not None and read_orientation(directory, ptr.size - 1, idx.size, sources=sources) is not None:
            log.info("verified the oriented lists of the %s graph at %s", kind, directory)


def verify_dataset(path: Path | str, *, checksums: bool = True, progress: bool = False,
                   max_classes: int = checks.DEFAULT_MAX_CLASSES) -> Manifest:
    """Check a dataset directory completely and return its manifest.

    Checks, in order: the manifest (readable, not from a newer format), the
    checksum of every file, then each array's shape and dtype against the
    manifest, the CSR invariants (indptr monotone, neighbour ids in range,
    neighbour lists sorted without duplicates, symmetric when the manifest says
    so), finite features, labels (no absurd class ids, see
    :func:`~saintpipe.services.dataset.checks.check_labels`, and a plausible
    ``num_classes`` in the manifest), disjoint, labelled splits, and the
    training graph when one is stored (``train_graph/``: exactly the graph the
    training nodes induce, see :func:`~saintpipe.services.dataset.train_graph.verify_train_graph`).

    Args:
        path: the dataset directory.
        checksums: also hash every file (the slowest step on big datasets).
        progress: show progress bars on stderr.
        max_classes: the most classes the labels may imply (``--max-classes``).

    Raises:
        DatasetError: the first problem found, naming the file at fault.
    """
    path = Path(path)
    manifest = read_manifest(path)
    if checksums:
        verify_checksums(path, manifest, progress=progress)
    n, e, f = manifest.num_nodes, manifest.num_edges, manifest.feature_dim

    indptr = load_npy(path / "indptr.npy")
    indices = load_npy(path / "indices.npy")
    _expect(path / "indptr.npy", indptr, (n + 1,), ("int64",))
    _expect(path / "indices.npy", indices, (e,), ("int32",))
    checks.check_topology(indptr, indices, symmetric=manifest.symmetric, where=str(path / "indices.npy"),
                          indptr_where=str(path / "indptr.npy"))

    verify_shard_ranges(path, manifest)
    for k, (start, stop) in enumerate(ProgressBar(manifest.shards, desc="feature shards", unit="shard",
                                           disable=not progress, leave=False)):
        shard_path = path / shard_file(k)
        shard = load_npy(shard_path)
        _expect(shard_path, shard, (stop - start, f), (manifest.feature_dtype,))
        checks.check_features(shard, stop - start, where=str(shard_path), first_row=start)

    labels_path = path / "labels.npy"
    labels = load_npy(labels_path)
    if manifest.multilabel:
        _expect(labels_path, labels, (n, manifest.num_classes), ("uint8",))
    else:
        _expect(labels_path, labels, (n,), ("int64",))
    num_classes, multilabel = checks.check_labels(labels, n, where=str(labels_path), max_classes=max_classes)
    if multilabel != manifest.multilabel or num_classes > manifest.num_classes:
        raise DatasetError(
            f"{labels_path}: holds {num_classes} classes (multi-label {multilabel}), manifest says "
            f"{manifest.num_classes} (multi-label {manifest.multilabel})"
        )
    verify_class_count(path, manifest, labels, max_classes)

    splits = {}
    for name in SPLITS:
        split_path = path / "split" / f"{name}.npy"
        splits[name] = load_npy(split_path)
        if splits[name].ndim != 1 or splits[name].dtype != np.int64:
            raise DatasetError(f"{split_path}: must be 1-D int64 node ids, got {splits[name].dtype} {splits[name].shape}")
    checks.check_splits(splits, labels, n, where=str(path / "split" / "{name}.npy"))
    train_graph = verify_train_graph(path, manifest, indptr, indices, splits["train"], checksums=checksums)
    if train_graph is not None:
        log.info("verified the training graph (%d nodes, %d edges) at %s", train_graph.num_nodes,
                 train_graph.num_edges, train_graph.where)
    _verify_orientations(path, manifest, indptr, indices, train_graph)
    log.info("verified dataset %s at %s", manifest.name, path)
    return manifest
