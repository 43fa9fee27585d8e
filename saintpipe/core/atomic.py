"""Replace a directory atomically: build it under a temporary sibling name, then rename it into place.

Readers of ``target`` see either the old directory or the complete new one,
never a half-written one; a failure while building leaves ``target`` as it was
and removes the temporary directory::

    with replacing_dir(out) as tmp:
        np.save(tmp / "indptr.npy", indptr)
        ...                                  # on success: tmp becomes out (mode 0o755)

The temporary directory is ``.<name>.tmp-XXXXXXXX`` beside ``target`` (same
file system, so the final rename is atomic; hidden, and recognisable as
leftovers of a crash). An existing ``target`` is first renamed to
``.<name>.old-<pid>`` and removed only after the new directory is in place;
readers that still have files of the old one open or mapped keep valid data
(its files are unlinked, never rewritten).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

TMP_INFIX = ".tmp-"
OLD_INFIX = ".old-"


def temp_sibling(target: Path | str) -> Path:
    """Create an empty temporary directory beside ``target`` (creating ``target``'s parents), named after it."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}{TMP_INFIX}", dir=target.parent))


def replace_dir(new: Path | str, target: Path | str) -> None:
    """Rename directory ``new`` to ``target``; an existing ``target`` is removed only after the rename.

    ``new`` must be on the same file system as ``target`` (a sibling, see :func:`temp_sibling`).
    If the second rename fails the old directory is put back, so ``target`` is never left missing.
    """
    new, target = Path(new), Path(target)
    if not target.exists():
        os.rename(new, target)
        return
    old = target.with_name(f".{target.name}{OLD_INFIX}{os.getpid()}")
    os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def replacing_dir(target: Path | str, *, mode: int = 0o755) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``target``; on success it replaces ``target``.

    Args:
        target: the directory to create or replace.
        mode: permissions of the new directory (``mkdtemp`` makes it 0o700).

    On an exception in the body (or in the final rename) the temporary directory
    is removed, ``target`` is left as it was, and the exception propagates.
    """
    tmp = temp_sibling(target)
    try:
        yield tmp
        os.chmod(tmp, mode)
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
