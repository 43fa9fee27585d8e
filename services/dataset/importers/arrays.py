"""Import raw numpy arrays: CSR topology, features, labels and a split, one ``.npy`` file each.

The split is given either as three files (``train`` / ``val`` / ``test``: node
ids or boolean masks) or as one per-node code file (``split``: 0 train, 1 val,
2 test, -1 none). :func:`from_arrays` is the shared validation core, also used
by the npz importer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from saintpipe.core.errors import DatasetError
from saintpipe.core.memory import require_memory
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.importers import coerce, input_files
from saintpipe.services.dataset.csr import csr_to_symmetric
from saintpipe.services.dataset.layout import SPLITS, load_npy

# File names looked for in a directory by :func:`find_array_files`.
ROLES = ("indptr", "indices", "features", "labels", "train", "val", "test", "split")


def from_arrays(
    arrays: Mapping[str, np.ndarray],
    where: Mapping[str, str],
    *,
    name: str,
    source: str,
    symmetrize: bool = False,
    max_classes: int = checks.DEFAULT_MAX_CLASSES,
) -> dict[str, Any]:
    """Validate and convert raw arrays (keyed by role, see ``ROLES``) into ``write_dataset`` arguments.

    ``where[role]`` names the array's origin in errors (a file, or ``FILE[member]``).
    Without ``symmetrize`` the adjacency must already be sorted, duplicate-free
    and symmetric; with it, it is rebuilt so. Arrays in a non-native byte order
    are converted; labels implying more than ``max_classes`` classes are refused.
    """
    for role in ("indptr", "indices", "features", "labels"):
        if role not in arrays:
            raise DatasetError(f"{where.get(role, role)}: file not found (the {role} array is required)")
    indptr = coerce.as_indptr(arrays["indptr"], where["indptr"])
    indices = coerce.as_indices(arrays["indices"], where["indices"])
    if symmetrize:
        indptr, indices = csr_to_symmetric(indptr, indices, where=f"{where['indptr']} / {where['indices']}")
    n = checks.check_topology(indptr, indices, symmetric=True, where=where["indices"], indptr_where=where["indptr"])
    features = coerce.as_features(arrays["features"], where["features"])
    checks.check_features(features, n, where=where["features"])
    labels = coerce.as_labels(arrays["labels"], where["labels"])
    checks.check_labels(labels, n, where=where["labels"], max_classes=max_classes)
    if "split" in arrays:
        splits = coerce.split_from_codes(arrays["split"], where["split"])
        if arrays["split"].shape != (n,):
            raise DatasetError(f"{where['split']}: split codes must have {n} entries, got shape {arrays['split'].shape}")
        split_where = {s: where["split"] for s in SPLITS}
    else:
        splits, split_where = {}, {}
        for split in SPLITS:
            if split not in arrays:
                raise DatasetError(f"{where.get(split, split)}: file not found (give train, val and test, or a split)")
            splits[split] = coerce.as_split(arrays[split], n, where[split])
            split_where[split] = where[split]
    checks.check_splits(splits, labels, n, where=split_where)
    return {
        "name": name,
        "indptr": indptr,
        "indices": indices,
        "features": features,
        "labels": labels,
        "splits": splits,
        "source": source + (" (adjacency symmetrized)" if symmetrize else ""),
    }


def find_array_files(directory: Path, overrides: Mapping[str, Path | None] | None = None) -> dict[str, Path]:
    """Role -> file: ``DIR/<role>.npy`` for each role present (``*_mask.npy`` accepted for splits), then overrides."""
    files: dict[str, Path] = {}
    for role in ROLES:
        found = [directory / name for name in (f"{role}.npy", f"{role}_mask.npy") if (directory / name).is_file()]
        if found:
            files[role] = found[0]
    files.update({role: Path(path) for role, path in (overrides or {}).items() if path is not None})
    return files


def import_arrays(files: Mapping[str, Path], *, name: str, symmetrize: bool = False,
                  max_classes: int = checks.DEFAULT_MAX_CLASSES) -> dict[str, Any]:
    """Read one ``.npy`` file per role (see ``ROLES``) into ``write_dataset`` arguments.

    Every file's header is checked before it is mapped
    (:func:`~saintpipe.services.dataset.importers.input_files.npy_file_header`), and the
    arrays together must fit the available memory: the import converts and
    checks them in memory.

    Raises:
        DatasetError: a missing, truncated, pickled or oversized file, a directory
            given as a file, a wrong dtype or shape, an id out of range, unsorted
            or asymmetric adjacency (without ``symmetrize``), NaN features,
            absurd labels (see ``max_classes``), bad splits; the message names the file.
    """
    unknown = set(files) - set(ROLES)
    if unknown:
        raise DatasetError(f"unknown array roles {sorted(unknown)}; expected some of {', '.join(ROLES)}")
    headers = {role: input_files.npy_file_header(Path(path)) for role, path in files.items()}
    require_memory(sum(h.nbytes for h in headers.values()),
                   f"importing {', '.join(str(p) for p in files.values())}", error=DatasetError)
    arrays = {role: load_npy(Path(path)) for role, path in files.items()}
    where = {role: str(path) for role, path in files.items()}
    for role in ROLES:
        where.setdefault(role, f"{role}.npy")
    return from_arrays(arrays, where, name=name, source="imported from raw numpy arrays", symmetrize=symmetrize,
                       max_classes=max_classes)
