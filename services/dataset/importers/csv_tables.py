"""Chunked reading of numeric CSV files, plain or gzip-compressed (OGB's raw layout), with errors naming the line.

OGB ships its graphs as headerless ``.csv.gz`` files: one edge, one feature
row, one label or one node id per line. Neither pandas nor pyarrow is a
dependency, so the files are decompressed in blocks of :data:`CHUNK_BYTES`
(cut at the last newline; the rest is carried to the next block) and each
block is parsed:

- integer tables (edges, labels, split ids, node counts) by a Numba kernel,
  :func:`parse_int_rows`, one pass over the bytes that reports the exact line
  and column of a bad field;
- float tables (features) by numpy's C parser (``np.loadtxt``); when it fails,
  the block is scanned again in Python to name the line.

So memory stays a block plus the parsed arrays, and every error is one line:
``raw/edge.csv.gz, line 7, column 2: 'x1' is not an integer``.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np
from numba import njit

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.input_files import require_file
from saintpipe.services.dataset.importers.tabular import accepts, shown

# Decompressed bytes parsed at once: big enough that per-block overhead vanishes, small beside the output.
CHUNK_BYTES = 16 << 20
# Marks an empty or "nan" field in the kernel's output (only where missing values are allowed).
MISSING = np.iinfo(np.int64).min
# Kernel status codes.
OK, BAD_TOKEN, TOO_FEW, TOO_MANY, EMPTY_FIELD, TOO_LARGE, NOT_INTEGRAL = range(7)
_PROBLEM = {
    BAD_TOKEN: "is not an integer",
    TOO_LARGE: "is too large",
    NOT_INTEGRAL: "is not an integer (it has a fractional part)",
}

_COMMA, _NEWLINE, _SPACE, _TAB, _CR = 44, 10, 32, 9, 13
_MINUS, _PLUS, _DOT, _ZERO, _NINE = 45, 43, 46, 48, 57


@njit(cache=True)
def _is_blank(c):
    return c == _SPACE or c == _TAB or c == _CR


@njit(cache=True)
def parse_int_rows(buf, ncols, allow_missing, out):
    """Parse comma-separated integers, ``ncols`` per line, from the bytes ``buf`` into ``out``.

    A field is optional blanks, an optional sign, digits, and optionally a
    fraction of zeros (``4.0``, as pandas writes integer labels stored as
    float). With ``allow_missing``, an empty field (a blank line when
    ``ncols == 1``) or ``nan`` (any case) is stored as ``MISSING``. Lines end
    with ``\\n`` (a ``\\r`` before it is ignored); the last line needs none.

    Args:
        buf: uint8 [B], whole lines.
        ncols: fields per line.
        allow_missing: accept empty and ``nan`` fields.
        out: int64 [>= lines * ncols], filled row-major.

    Returns:
        ``(rows, status, line, column)``: rows parsed, and ``OK`` or an error code
        with the 0-based line (within ``buf``) and column where parsing stopped.
    """
    n = buf.size
    pos = 0
    row = 0
    while pos < n:
        col = 0
        while True:
            while pos < n and _is_blank(buf[pos]):
                pos += 1
            negative = False
            signed = False
            if pos < n and (buf[pos] == _MINUS or buf[pos] == _PLUS):
                negative = buf[pos] == _MINUS
                signed = True
                pos += 1
            value = 0
            digits = 0
            while pos < n and _ZERO <= buf[pos] <= _NINE:
                if digits == 18:
                    return row, TOO_LARGE, row, col
                value = value * 10 + (buf[pos] - _ZERO)
                digits += 1
                pos += 1
            missing = False
            if digits > 0 and pos < n and buf[pos] == _DOT:
                pos += 1
                while pos < n and buf[pos] == _ZERO:
                    pos += 1
                if pos < n and _ZERO < buf[pos] <= _NINE:
                    return row, NOT_INTEGRAL, row, col
            elif digits == 0 and not signed and pos + 3 <= n \
                    and (buf[pos] | 32) == 110 and (buf[pos + 1] | 32) == 97 and (buf[pos + 2] | 32) == 110:
                missing = True  # "nan", any case
                pos += 3
            elif digits == 0:
                if signed:
                    return row, BAD_TOKEN, row, col
                missing = True  # an empty field
            while pos < n and _is_blank(buf[pos]):
                pos += 1
            if pos < n and buf[pos] != _COMMA and buf[pos] != _NEWLINE:
                return row, BAD_TOKEN, row, col
            if col >= ncols:
                return row, TOO_MANY, row, col
            if missing:
                if not allow_missing:
                    return row, EMPTY_FIELD, row, col
                out[row * ncols + col] = MISSING
            else:
                out[row * ncols + col] = -value if negative else value
            col += 1
            if pos < n and buf[pos] == _COMMA:
                pos += 1
                continue
            break
        if col < ncols:
            return row, TOO_FEW, row, col
        row += 1
        pos += 1  # the newline
    return row, OK, row, 0


def _open(path: Path) -> gzip.GzipFile | io.BufferedReader:
    require_file(path, "a CSV file")
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None


def blocks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(first_line, block)`` over the file's whole lines; ``first_line`` is 1-based.

    Raises:
        DatasetError: not gzip data, a truncated or corrupt archive, an I/O error.
    """
    line = 1
    carry = b""
    with _open(path) as fh:
        while True:
            try:
                data = fh.read(chunk_bytes)
            except (gzip.BadGzipFile, zlib.error) as exc:
                raise DatasetError(f"{path}: not a readable gzip file ({exc})") from None
            except EOFError:
                raise DatasetError(f"{path}: the gzip data ends early; is the file truncated?") from None
            except OSError as exc:
                raise DatasetError(f"{path}: cannot read: {exc}") from None
            if not data:
                break
            data = carry + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # one line longer than a block: keep reading
                carry = data
                continue
            block, carry = data[:cut], data[cut:]
            yield line, block
            line += block.count(b"\n")
    if carry:
        yield line, carry


def first_line_fields(path: Path) -> int:
    """How many comma-separated fields the file's first line has (0 for an empty file)."""
    for _, block in blocks(path, chunk_bytes=1 << 16):
        return block.split(b"\n", 1)[0].count(b",") + 1
    return 0


def _line_text(block: bytes, index: int) -> bytes:
    start = 0
    for _ in range(index):
        start = block.index(b"\n", start) + 1
    end = block.find(b"\n", start)
    return block[start:] if end < 0 else block[start:end]


def _shown(field: bytes) -> str:
    return shown(field.decode("utf-8", "replace").strip())


def _int_error(path: Path, block: bytes, first_line: int, status: int, index: int, col: int, ncols: int) -> DatasetError:
    line_no = first_line + index
    text = _line_text(block, index).rstrip(b"\r")
    fields = text.split(b",")
    at = f"{path}, line {line_no}"
    if not text.strip():
        return DatasetError(f"{at}: empty line (expected {ncols} comma-separated integer(s))")
    if status in (TOO_FEW, TOO_MANY):
        return DatasetError(f"{at}: {len(fields)} field(s), expected {ncols}")
    value = _shown(fields[col]) if col < len(fields) else "''"
    if status == EMPTY_FIELD:
        return DatasetError(f"{at}, column {col + 1}: no value ({value}) where an integer is required")
    return DatasetError(f"{at}, column {col + 1}: {value} {_PROBLEM[status]}")


def read_int_table(path: Path, ncols: int, *, allow_missing: bool = False,
                   dtype: type = np.int64) -> np.ndarray:
    """The whole file as ``dtype`` [rows, ncols]; ``MISSING`` marks empty / nan fields (``allow_missing``).

    With ``dtype=np.int32`` (node ids) every value must lie in ``[0, 2**31)``.

    Raises:
        DatasetError: naming the file, line and column of the first bad field.
    """
    parts = []
    for first_line, block in blocks(path):
        buf = np.frombuffer(block, dtype=np.uint8)
        out = np.empty((block.count(b"\n") + 1) * ncols, dtype=np.int64)
        rows, status, index, col = parse_int_rows(buf, ncols, allow_missing, out)
        if status != OK:
            raise _int_error(path, block, first_line, status, index, col, ncols)
        values = out[: rows * ncols].reshape(rows, ncols)
        if dtype is np.int32:
            if (bad := np.flatnonzero((values < 0).any(axis=1) | (values >= 2**31).any(axis=1))).size:
                row = values[bad[0]]
                value = int(row[(row < 0) | (row >= 2**31)][0])
                raise DatasetError(f"{path}, line {first_line + int(bad[0])}: node id {value} is not in "
                                   f"[0, {2**31 - 1}]")
            values = values.astype(np.int32)
        parts.append(values)
    return _joined(parts, ncols, dtype)


def _joined(parts: list[np.ndarray], ncols: int, dtype: type) -> np.ndarray:
    """The blocks' rows as one array (the only block itself: no copy)."""
    if not parts:
        return np.empty((0, ncols), dtype=dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _float_error(path: Path, block: bytes, first_line: int, ncols: int) -> DatasetError | None:
    """Find the first line of ``block`` that is not ``ncols`` numbers (the slow path, after a failure)."""
    for index, raw in enumerate(block.split(b"\n")):
        text = raw.rstrip(b"\r")
        if not text.strip():
            if index == block.count(b"\n"):  # what follows the block's last newline
                continue
            return DatasetError(f"{path}, line {first_line + index}: empty line (expected {ncols} numbers)")
        fields = text.split(b",")
        if len(fields) != ncols:
            return DatasetError(f"{path}, line {first_line + index}: {len(fields)} field(s), expected {ncols}")
        for col, field in enumerate(fields):
            if not accepts(field.decode("utf-8", "replace"), "number"):
                return DatasetError(f"{path}, line {first_line + index}, column {col + 1}: {_shown(field)} "
                                    "is not a number")
    return None


def read_float_table(path: Path, ncols: int, dtype: type = np.float32) -> np.ndarray:
    """The whole file as ``dtype`` [rows, ncols], parsed block by block with numpy's C parser.

    Raises:
        DatasetError: naming the file and line (and column) of the first row that is not ``ncols`` numbers.
    """
    parts = []
    for first_line, block in blocks(path):
        if b"\n\n" in block or b"\n\r\n" in block or block[:1] in (b"\n", b"\r"):
            # np.loadtxt skips blank lines, which would shift every later row onto the wrong node.
            raise _float_error(path, block, first_line, ncols) or DatasetError(
                f"{path}: an empty line near line {first_line}")
        try:
            values: np.ndarray = np.loadtxt(io.StringIO(block.decode("utf-8")), dtype=dtype, delimiter=",", comments=None,
                                ndmin=2)
        except (ValueError, UnicodeDecodeError) as exc:
            located = _float_error(path, block, first_line, ncols)
            raise (located or DatasetError(f"{path}: near line {first_line}: {exc}")) from None
        if values.shape[1] != ncols:
            raise _float_error(path, block, first_line, ncols) or DatasetError(
                f"{path}: {values.shape[1]} fields per line near line {first_line}, expected {ncols}")
        parts.append(values)
    return _joined(parts, ncols, dtype)
