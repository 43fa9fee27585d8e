"""Reading files a user names, without trusting them to be what they claim; writing files whole."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


class TooLarge(Exception):
    """The file holds more than the caller's limit: not the kind of file asked for (a dataset, a device)."""


def read_capped(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path``, reading at most ``limit`` + 1 of them (a wrong path may name a huge file or a device).

    Raises:
        TooLarge: the file holds more than ``limit`` bytes.
        OSError: it cannot be opened or read.
    """
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{path}: larger than {limit} bytes")
    return data


def write_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], object] | bytes, mode: int = 0o644) -> Path:
    """Write a file whole or not at all: into a temporary file beside ``path``, fsynced, renamed over it.

    A reader (or a crash mid-write) sees the old file or the new one, never a torn one.

    Args:
        write: the bytes, or a function that writes them to the open file (``torch.save``, ``json.dump``...).
        mode: the new file's permissions.
    """
    path = Path(path)
    tmp = stage(path, write, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def stage(path: Path, write: Callable[[BinaryIO], object] | bytes, mode: int = 0o644, *, prefix: str | None = None,
          suffix: str = ".tmp") -> Path:
    """A new temporary file beside ``path`` (named ``prefix``, default ``.<name>.``, random, ``suffix``) holding
    what ``write`` gives (as for :func:`write_atomic`), fsynced, with ``mode``: for the caller to rename into
    place. Removed again when writing fails."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}." if prefix is None else prefix, suffix=suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(write, bytes):
                fh.write(write)
            else:
                write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)
