"""Checks of input files before they are read: a regular file, and plausible ``.npy`` / ``.npz`` headers.

An ``.npy`` header declares the array's dtype and shape, and numpy allocates
that much before it reads any data: a crafted header of a few bytes can ask for
petabytes. So the importers read the headers first (for an ``.npz``, a zip of
``.npy`` members, each member's header through :mod:`zipfile`, without
inflating its data) and refuse, naming the file or ``FILE[member]``: object
(pickled) dtypes, malformed headers, sizes beyond the available memory
(:func:`saintpipe.core.memory.require_memory`) and data shorter than the header
declares.
"""

from __future__ import annotations

import math
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy_format

from saintpipe.core.errors import DatasetError
from saintpipe.core.memory import require_memory

# Readers of the header layouts numpy writes for ordinary arrays (3.0 is only used for
# structured dtypes with non-latin-1 field names, which no dataset array has).
_HEADER_READERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}


@dataclass(frozen=True)
class ArrayHeader:
    """What an ``.npy`` header declares, and where its data starts."""

    shape: tuple[int, ...]
    dtype: np.dtype
    data_offset: int

    @property
    def nbytes(self) -> int:
        """Bytes of data the header declares (a Python int: no overflow, whatever the shape)."""
        return math.prod(self.shape) * self.dtype.itemsize

    def describe(self) -> str:
        return f"{' x '.join(str(d) for d in self.shape) or 'scalar'} {self.dtype} array"


def require_file(path: Path, expected: str) -> None:
    """``path`` is an existing regular file; ``expected`` names what it should be (``a .npz file``).

    Raises:
        DatasetError: ``in/dir: is a directory, expected a .npz file``, ``…: file not found``,
            or a FIFO, device or socket (reading one could block or never end).
    """
    if path.is_dir():
        raise DatasetError(f"{path}: is a directory, expected {expected}")
    if not path.exists():
        raise DatasetError(f"{path}: file not found")
    if not path.is_file():
        raise DatasetError(f"{path}: not a regular file, expected {expected}")


def read_header(fh: IO[bytes], where: str) -> ArrayHeader:
    """Read the magic string and header of an ``.npy`` stream positioned at its start.

    Raises:
        DatasetError: not an ``.npy`` array, a malformed header or a negative dimension.
    """
    try:
        version = npy_format.read_magic(fh)
    except ValueError:
        raise DatasetError(f"{where}: not a .npy array (no .npy magic string)") from None
    reader = _HEADER_READERS.get(version)
    if reader is None:
        raise DatasetError(f"{where}: unsupported .npy format version {version[0]}.{version[1]}")
    try:
        shape, _, dtype = reader(fh)
    # The header is untrusted text parsed by numpy: whatever it raises means "malformed".
    except Exception as exc:  # noqa: BLE001
        raise DatasetError(f"{where}: malformed .npy header ({str(exc).splitlines()[0][:200]})") from None
    if any(d < 0 for d in shape):
        raise DatasetError(f"{where}: malformed .npy header (negative dimension in shape {shape})")
    return ArrayHeader(shape=tuple(shape), dtype=dtype, data_offset=fh.tell())


def check_header(header: ArrayHeader, where: str, data_bytes: int) -> None:
    """Refuse object dtypes, sizes beyond the available memory, and data shorter than declared.

    ``data_bytes`` is what the file (or zip member) holds after the header.
    """
    if header.dtype.hasobject:
        raise DatasetError(f"{where}: holds pickled (object) data, dtype {header.dtype}; only plain numeric "
                           "arrays are read (pickle is never enabled)")
    require_memory(header.nbytes, f"{where}: a {header.describe()} (as its header declares)", error=DatasetError)
    if data_bytes < header.nbytes:
        raise DatasetError(f"{where}: truncated: its header declares a {header.describe()} ({header.nbytes:,} bytes) "
                           f"but only {data_bytes:,} bytes of data follow")


def npy_file_header(path: Path) -> ArrayHeader:
    """The checked header of an ``.npy`` file (see :func:`check_header`), read without loading the data."""
    require_file(path, "a .npy file")
    try:
        with open(path, "rb") as fh:
            header = read_header(fh, str(path))
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    check_header(header, str(path), path.stat().st_size - header.data_offset)
    return header


def npz_headers(path: Path) -> dict[str, ArrayHeader]:
    """The checked header of every member of an ``.npz`` archive, keyed as ``np.load`` keys them.

    Raises:
        DatasetError: ``x.npz: not an .npz file (not a zip archive)``, a truncated archive, an
            encrypted or non-``.npy`` member, or a member header refused by :func:`check_header`.
    """
    require_file(path, "a .npz file")
    headers: dict[str, ArrayHeader] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                key = info.filename.removesuffix(".npy")
                where = f"{path}[{key}]"
                with archive.open(info) as fh:
                    header = read_header(fh, where)
                check_header(header, where, info.file_size - header.data_offset)
                headers[key] = header
    except zipfile.BadZipFile as exc:
        with open(path, "rb") as fh:
            is_zip = fh.read(2) == b"PK"
        if not is_zip:
            raise DatasetError(f"{path}: not an .npz file (not a zip archive)") from None
        raise DatasetError(f"{path}: not a readable npz archive ({exc}); is it truncated?") from None
    except (RuntimeError, NotImplementedError, EOFError, OSError, zlib.error) as exc:
        # RuntimeError: an encrypted member; NotImplementedError: an unknown compression method.
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    total = sum(h.nbytes for h in headers.values())
    require_memory(total, f"{path}: its {len(headers)} arrays", error=DatasetError)
    return headers
