"""Where a dataset is written: which ``--out`` may be created or replaced, and errors that name it.

Writing a dataset must never destroy anything else. Before any work starts,
:func:`check_output` refuses an ``--out``

- that exists and is not a dataset directory (a regular file, a symbolic link,
  which is never followed, a FIFO, which is never opened, a device, a socket, a
  directory without a manifest), with or without ``--force``: ``--force``
  replaces only a saintpipe dataset (a directory whose ``manifest.json`` parses)
  or an empty directory;
- that exists and is a dataset, without ``--force``;
- that holds one of the inputs, or lies inside an input directory (paths
  compared after resolving symbolic links);
- whose nearest existing parent is not a directory or not writable.

The writer checks the same again right before its final rename
(:func:`replaceable` is the ``check`` of :func:`saintpipe.core.atomic.replacing_dir`),
and :func:`writing` turns the OS errors of the write into a
:class:`~saintpipe.core.errors.DatasetError` naming ``--out``.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from saintpipe.core.atomic import TMP_INFIX, kind_of
from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.manifest import MANIFEST_NAME, read_manifest

__all__ = ["check_apart", "check_output", "replaceable", "writing"]

# A manifest lists a checksum per file: far below this. A larger "manifest.json" is not one (and is not read).
_MANIFEST_MAX_BYTES = 64 << 20


def _not_a_dataset(path: Path) -> str | None:
    """Why the existing ``path`` is not a dataset directory, or None when it is one (or an empty directory)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return f"a symbolic link to {os.readlink(path)}; links are not followed"
    if not stat.S_ISDIR(st.st_mode):
        return kind_of(st.st_mode)
    manifest = path / MANIFEST_NAME
    try:
        mst = os.lstat(manifest)
    except FileNotFoundError:
        with os.scandir(path) as entries:
            return None if next(entries, None) is None else f"no {MANIFEST_NAME}"
    if not stat.S_ISREG(mst.st_mode):
        return f"its {MANIFEST_NAME} is {kind_of(mst.st_mode)}"
    if mst.st_size > _MANIFEST_MAX_BYTES:
        return f"its {MANIFEST_NAME} is {mst.st_size} bytes, too large for a manifest"
    try:
        read_manifest(path)
    except DatasetError as exc:
        return str(exc).removeprefix(f"{path}/")
    return None


def replaceable(path: Path) -> None:
    """Raise unless ``path`` is a dataset directory (or an empty directory) that ``--force`` may replace."""
    try:
        why = _not_a_dataset(path)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot inspect it: {exc.strerror or exc}") from exc
    if why is not None:
        raise DatasetError(f"{path}: exists and is not a saintpipe dataset ({why}); --force only replaces a "
                           "dataset: choose another --out or remove it yourself")


def check_apart(out: Path, inputs: Iterable[Path | None]) -> None:
    """Refuse an ``out`` that is or holds an input, or lies inside an input directory (symbolic links resolved)."""
    real_out = Path(os.path.realpath(out))
    for given in inputs:
        if given is None:
            continue
        real = Path(os.path.realpath(given))
        if real == real_out or real_out in real.parents:
            raise DatasetError(f"{out}: --out is or holds the input {given}; writing there would destroy it: "
                               "choose another --out")
        if real in real_out.parents and real.is_dir():
            raise DatasetError(f"{out}: --out lies inside the input directory {given}: choose an --out outside it")


def _check_parent(out: Path) -> None:
    """Refuse an ``out`` whose nearest existing parent is not a writable directory."""
    for parent in Path(os.path.abspath(out)).parents:
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            continue
        except OSError as exc:  # a component is not a directory, a loop of links, ...
            raise DatasetError(f"{out}: cannot create it: {parent}: {exc.strerror or exc}") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise DatasetError(f"{out}: cannot create it: {parent} is {kind_of(st.st_mode)}, not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise DatasetError(f"{out}: cannot create it: no permission to write in {parent}")
        return


def check_output(out: Path | str, *, overwrite: bool, inputs: Iterable[Path | None] = ()) -> None:
    """Refuse, before any work starts, an ``out`` that a dataset write must not create or replace.

    Args:
        out: the dataset directory to write (``--out``).
        overwrite: ``--force``: replace an existing dataset there.
        inputs: the files and directories the dataset is made from; ``out`` must stay apart from them.

    Raises:
        DatasetError: naming ``out`` and what is wrong (see the module docstring).
    """
    out = Path(out)
    check_apart(out, inputs)
    _check_parent(out)
    try:
        os.lstat(out)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DatasetError(f"{out}: cannot inspect it: {exc.strerror or exc}") from exc
    replaceable(out)
    if not overwrite:
        raise DatasetError(f"{out}: already exists; choose another --out or pass --force to replace it")


@contextlib.contextmanager
def writing(out: Path) -> Iterator[None]:
    """Turn an ``OSError`` of the body (disk full, no permission, ``/proc``, ...) into a DatasetError naming ``out``."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        name = None if exc.filename is None else Path(os.fsdecode(exc.filename))
        if name is not None and TMP_INFIX in name.name:  # making the temporary directory beside out
            reason += f" (creating a directory in {name.parent})"
        elif name is not None and name != out and TMP_INFIX not in str(name):
            reason += f" ({name})"
        raise DatasetError(f"{out}: cannot write: {reason}") from exc
