"""Change a dataset's number of feature shards (and optionally the feature dtype), safely.

The new dataset is built complete in a temporary directory beside the target:
unchanged files are hard-linked (copied where links are impossible), the new
shard files are streamed from the old ones in row blocks, the manifest is
written last, and only then does a rename swap it in. A failure at any point
leaves the old dataset as it was. Readers that still map old shard files keep
valid data: the old files are unlinked, never rewritten. An ``out`` follows the
rules of every dataset write (:mod:`saintpipe.services.dataset.output`): only a
dataset is replaced, and it must lie apart from the source.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np

from saintpipe.core.atomic import replacing_dir
from saintpipe.core.bars import ProgressBar
from saintpipe.core.errors import DatasetError
from saintpipe.core.report import plural
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.layout import shard_file, shard_ranges
from saintpipe.services.dataset.manifest import FeatureDtype, Manifest, sha256_file, write_manifest
from saintpipe.services.dataset.output import check_output, replaceable, writing
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.dataset.verify import verify_dataset

log = logging.getLogger(__name__)

# Rows copied per block while streaming features into new shards.
_BLOCK_ROWS = 1 << 16


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def reshard_dataset(
    path: Path | str,
    num_shards: int,
    *,
    out: Path | str | None = None,
    feature_dtype: FeatureDtype | None = None,
    overwrite: bool = False,
    progress: bool = False,
) -> Manifest:
    """Rewrite the feature shards of the dataset at ``path`` as ``num_shards`` contiguous ranges.

    Args:
        path: the dataset directory (verified first, so corruption is not copied).
        num_shards: the new number of shards.
        out: write the resharded dataset here instead of replacing ``path`` (the same directory as
            ``path``: in place). Neither inside ``path`` nor holding it.
        feature_dtype: also convert features (``float32`` or ``float16``); default: keep.
        overwrite: with ``out``, replace an existing dataset there (never anything else).
        progress: show a progress bar on stderr.

    Returns:
        The new manifest.

    Raises:
        DatasetError: the source fails verification, ``out`` may not be written (see
            :func:`~saintpipe.services.dataset.output.check_output`), the shard count is impossible,
            or writing failed (the OS reason, naming the target).
    """
    path = Path(path)
    if out is None or os.path.realpath(out) == os.path.realpath(path):
        # In place: the real directory, so that a symbolic link to a dataset stays a link to it.
        target = Path(os.path.realpath(path))
    else:
        target = Path(out)
        check_output(target, overwrite=overwrite, inputs=[path])
    manifest = verify_dataset(path, progress=progress)
    dtype = feature_dtype or manifest.feature_dtype
    if dtype not in ("float32", "float16"):
        raise DatasetError(f"feature dtype must be float32 or float16, got {dtype!r}")
    ranges = shard_ranges(manifest.num_nodes, num_shards)
    dataset = open_dataset(path)

    with writing(target), replacing_dir(target, check=replaceable) as tmp:
        old_shards = {shard_file(k) for k in range(manifest.num_shards)}
        for rel in manifest.files:
            if rel not in old_shards:
                _link_or_copy(path / rel, tmp / rel)
        with ProgressBar(total=manifest.num_nodes, unit="row", desc="resharding", disable=not progress,
                  leave=False) as bar:
            for k, (start, stop) in enumerate(ranges):
                _write_shard(dataset, tmp / shard_file(k), start, stop, dtype, bar)
        files = {str(p.relative_to(tmp)): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        new = manifest.model_copy(update={"shards": ranges, "files": files, "feature_dtype": dtype})
        write_manifest(tmp, new)
    log.info("resharded %s into %s at %s", path, plural(num_shards, "shard"), target)
    return new


def _write_shard(dataset, dst: Path, start: int, stop: int, dtype: str, bar: ProgressBar) -> None:
    """Stream rows [start, stop) of the old shards into one new .npy file, block by block."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    out = np.lib.format.open_memmap(dst, mode="w+", dtype=dtype, shape=(stop - start, dataset.manifest.feature_dim))
    for lo in range(start, stop, _BLOCK_ROWS):
        hi = min(lo + _BLOCK_ROWS, stop)
        with np.errstate(over="ignore"):  # overflow is reported below, naming the node
            block = dataset.gather_features(np.arange(lo, hi)).astype(dtype)
        if dtype == "float16":
            checks.check_features(block, hi - lo, where="features as float16", first_row=lo)
        out[lo - start : hi - start] = block
        bar.update(hi - lo)
    out.flush()
    del out
