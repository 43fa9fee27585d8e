"""Write and open dataset directories.

The files a dataset directory holds are listed in
:mod:`saintpipe.services.dataset.layout`. Readers memory-map every array:
sampler processes on one host share the page cache instead of holding copies.
Writers build the whole directory under a temporary name beside ``out`` and
rename it at the end (:func:`saintpipe.core.atomic.replacing_dir`), so a
failure never leaves a half-written dataset and never touches an existing one;
``overwrite`` replaces only a dataset (:mod:`saintpipe.services.dataset.output`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from saintpipe.core.atomic import replacing_dir
from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.layout import SPLITS, load_npy, shard_file, shard_ranges
from saintpipe.services.dataset.manifest import (
    FORMAT_VERSION,
    FeatureDtype,
    Manifest,
    SampleGraph,
    read_manifest,
    sha256_file,
    write_manifest,
)
from saintpipe.services.dataset.output import check_output, replaceable, writing
from saintpipe.services.dataset.verify import verify_dataset

__all__ = ["Dataset", "open_dataset", "write_dataset"]

log = logging.getLogger(__name__)


@dataclass
class Dataset:
    """An opened dataset directory; all arrays are read-only memory maps."""

    path: Path
    manifest: Manifest
    indptr: np.ndarray
    indices: np.ndarray
    labels: np.ndarray
    splits: dict[str, np.ndarray]
    _shards: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def num_nodes(self) -> int:
        return self.manifest.num_nodes

    @property
    def num_edges(self) -> int:
        return self.manifest.num_edges

    @property
    def shard_starts(self) -> np.ndarray:
        return np.array([a for a, _ in self.manifest.shards] + [self.num_nodes], dtype=np.int64)

    def degrees(self) -> np.ndarray:
        return np.diff(self.indptr)

    def feature_shard(self, k: int) -> np.ndarray:
        """The memory-mapped rows of shard ``k`` (rows ``manifest.shards[k]``)."""
        if not 0 <= k < self.manifest.num_shards:
            raise DatasetError(f"{self.path}: shard {k} does not exist (dataset has {self.manifest.num_shards})")
        if k not in self._shards:
            path = self.path / shard_file(k)
            arr = load_npy(path)
            start, stop = self.manifest.shards[k]
            if arr.shape != (stop - start, self.manifest.feature_dim):
                raise DatasetError(f"{path}: shape {arr.shape}, manifest says ({stop - start}, {self.manifest.feature_dim})")
            self._shards[k] = arr
        return self._shards[k]

    def gather_features(self, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` of the full feature matrix, in request order (the in-process path)."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty((ids.size, self.manifest.feature_dim), dtype=self.manifest.feature_dtype)
        owner = np.searchsorted(self.shard_starts, ids, side="right") - 1
        for k in np.unique(owner):
            sel = np.flatnonzero(owner == k)
            out[sel] = self.feature_shard(int(k))[ids[sel] - self.manifest.shards[k][0]]
        return out

    def features(self) -> np.ndarray:
        """The whole feature matrix in memory (small graphs only)."""
        return np.concatenate([self.feature_shard(k) for k in range(self.manifest.num_shards)])


def open_dataset(path: Path | str, verify: bool = False) -> Dataset:
    """Open a dataset directory, memory-mapping its arrays.

    Args:
        path: the dataset directory.
        verify: also check every file's checksum and the arrays' invariants
            (see :func:`saintpipe.services.dataset.verify.verify_dataset`).

    Raises:
        DatasetError: naming the file at fault.
    """
    path = Path(path)
    manifest = read_manifest(path)
    if verify:
        verify_dataset(path)
    indptr = load_npy(path / "indptr.npy")
    indices = load_npy(path / "indices.npy")
    if indptr.shape != (manifest.num_nodes + 1,):
        raise DatasetError(f"{path / 'indptr.npy'}: shape {indptr.shape}, manifest says ({manifest.num_nodes + 1},)")
    if indices.shape != (manifest.num_edges,):
        raise DatasetError(f"{path / 'indices.npy'}: shape {indices.shape}, manifest says ({manifest.num_edges},)")
    labels = load_npy(path / "labels.npy")
    splits = {name: load_npy(path / "split" / f"{name}.npy") for name in SPLITS}
    return Dataset(path=path, manifest=manifest, indptr=indptr, indices=indices, labels=labels, splits=splits)


def _save(directory: Path, rel: str, array: np.ndarray) -> None:
    target = directory / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    np.save(target, np.ascontiguousarray(array), allow_pickle=False)


def write_dataset(
    out: Path | str,
    *,
    name: str,
    indptr: np.ndarray,
    indices: np.ndarray,
    features: np.ndarray,
    labels: np.ndarray,
    splits: Mapping[str, np.ndarray],
    num_shards: int = 1,
    feature_dtype: FeatureDtype = "float32",
    symmetric: bool = True,
    extra: Mapping[str, np.ndarray] | None = None,
    source: str = "",
    overwrite: bool = False,
    max_classes: int = checks.DEFAULT_MAX_CLASSES,
    sample_graph: SampleGraph = "full",
) -> Manifest:
    """Validate the arrays and write them as a dataset directory, atomically.

    Args:
        out: the dataset directory to create.
        name: the dataset's name.
        indptr, indices: CSR topology (int64 / int32, sorted neighbour lists).
        features: float [N, F]; stored as ``feature_dtype``.
        labels: int64 [N] or uint8 [N, C].
        splits: ``train``, ``val`` and ``test`` node id arrays.
        num_shards: number of contiguous feature shard files.
        feature_dtype: ``float32`` or ``float16``.
        symmetric: the graph is undirected and stores both directions (checked).
        extra: more arrays to store (``rel/path.npy`` -> array), checksummed too.
        source: a note on where the data came from.
        overwrite: replace an existing dataset at ``out`` (only once the new one is complete).
            Only a dataset directory (or an empty one) is ever replaced, see
            :func:`saintpipe.services.dataset.output.check_output`.
        max_classes: refuse labels that imply more classes (``--max-classes``,
            see :func:`saintpipe.services.dataset.checks.check_labels`).

    Raises:
        DatasetError: invalid arrays; ``out`` exists and ``overwrite`` is false, or it is not a
            dataset; writing failed (the OS reason, naming ``out``).
    """
    out = Path(out)
    check_output(out, overwrite=overwrite)
    if feature_dtype not in ("float32", "float16"):
        raise DatasetError(f"feature dtype must be float32 or float16, got {feature_dtype!r}")
    num_nodes = checks.check_topology(indptr, indices, symmetric=symmetric)
    checks.check_features(features, num_nodes)
    num_classes, multilabel = checks.check_labels(labels, num_nodes, max_classes=max_classes)
    checks.check_splits(dict(splits), labels, num_nodes)
    ranges = shard_ranges(num_nodes, num_shards)

    with writing(out), replacing_dir(out, check=replaceable) as tmp:
        for rel, array in {"indptr.npy": indptr, "indices.npy": indices, "labels.npy": labels,
                           **{f"split/{s}.npy": np.asarray(splits[s], dtype=np.int64) for s in SPLITS}}.items():
            _save(tmp, rel, array)
        for k, (start, stop) in enumerate(ranges):
            with np.errstate(over="ignore"):  # overflow is reported below, naming the node
                shard = np.asarray(features[start:stop], dtype=feature_dtype)
            if feature_dtype == "float16":
                # float32 values beyond 65504 become inf in float16: refuse rather than store them.
                checks.check_features(shard, stop - start, where="features as float16", first_row=start)
            _save(tmp, shard_file(k), shard)
            del shard
        for rel, array in (extra or {}).items():
            _save(tmp, rel, array)
        files = {
            str(p.relative_to(tmp)): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()
        }
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            name=name,
            num_nodes=num_nodes,
            num_edges=int(indices.size),
            feature_dim=int(features.shape[1]),
            feature_dtype=feature_dtype,
            num_classes=num_classes,
            multilabel=multilabel,
            symmetric=symmetric,
            shards=ranges,
            files=files,
            source=source,
            sample_graph=sample_graph,
        )
        write_manifest(tmp, manifest)
    log.info("wrote dataset %s to %s (%d nodes, %d edges)", name, out, num_nodes, indices.size)
    return manifest
