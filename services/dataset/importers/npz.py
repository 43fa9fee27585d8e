"""Import the npz format of the shipped Planetoid graphs (cora, citeseer).

The archive holds ``indptr``, ``indices``, ``features``, ``labels`` (-1 =
unlabelled) and the split as boolean masks ``train_mask`` / ``val_mask`` /
``test_mask`` (or node id arrays ``train`` / ``val`` / ``test``, or per-node
codes ``split``).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers import input_files
from saintpipe.services.dataset.checks import DEFAULT_MAX_CLASSES
from saintpipe.services.dataset.importers.arrays import ROLES, from_arrays


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """All members of an npz archive, without pickle; errors name the file (or ``FILE[member]``).

    Every member's header is checked first (:func:`~saintpipe.services.dataset.importers.input_files.npz_headers`):
    a crafted header can declare any size, and numpy allocates it before reading.
    """
    input_files.npz_headers(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except (zipfile.BadZipFile, EOFError) as exc:
        raise DatasetError(f"{path}: not a readable npz archive ({exc}); is it truncated?") from None
    except ValueError as exc:
        raise DatasetError(f"{path}: cannot read ({exc})") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None


def import_npz(path: Path | str, *, name: str | None = None, symmetrize: bool = False,
               max_classes: int = DEFAULT_MAX_CLASSES) -> dict[str, Any]:
    """Read a Planetoid-style npz into arrays ready for :func:`saintpipe.services.dataset.store.write_dataset`.

    Args:
        path: the ``.npz`` file.
        name: dataset name (default: the file's stem).
        symmetrize: rebuild the adjacency sorted and symmetric instead of
            refusing one that is not.
        max_classes: refuse labels that imply more classes (``--max-classes``).

    Raises:
        DatasetError: not an npz, a missing, pickled or oversized member, wrong dtype
            or shape, an id out of range, unsorted or asymmetric adjacency, NaN
            features, absurd labels, bad splits; the message names ``FILE[member]``.
    """
    path = Path(path)
    members = load_npz(path)
    arrays, where = {}, {}
    for role in ROLES:
        key = next((k for k in (f"{role}_mask", role) if k in members), role)
        where[role] = f"{path}[{key}]"
        if key in members:
            arrays[role] = members[key]
    for role in ("indptr", "indices", "features", "labels"):
        if role not in arrays:
            raise DatasetError(f"{path}: missing array {role!r} (the archive holds {', '.join(sorted(members)) or 'nothing'})")
    if "split" not in arrays and not all(s in arrays for s in ("train", "val", "test")):
        raise DatasetError(f"{path}: missing the split: give train_mask, val_mask and test_mask (or train, val, test)")
    return from_arrays(arrays, where, name=name or path.stem, source=f"imported from {path.name}",
                       symmetrize=symmetrize, max_classes=max_classes)
