"""Reading delimited text tables (edge lists and keyed side files) with numpy's C parser.

Format rules: lines starting with ``#`` are comments; the delimiter is a tab
for ``.tsv``/``.tab``, a comma for ``.csv``, otherwise sniffed from the first
line (tab, comma, else runs of whitespace, as in SNAP edge lists). A header
row is detected when the first row's fields are all non-numeric while the
second row has a numeric field, or the first row's fields are common column
names (src, dst, source, target, id, ...); ``header=True/False`` overrides.

Node ids are integers unless the caller asks for strings (``--string-ids``):
a token that is not an integer is an error naming the file and line, never a
silent switch to string ids (which would build a different graph). Parse
errors name the line in the file (numpy's own messages count data rows
differently from one error to the next), found by a second, Python pass over
the file that runs only after numpy's parser failed.
"""

from __future__ import annotations

import csv
import itertools
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.input_files import require_file

_HEADER_WORDS = {"src", "dst", "source", "target", "from", "to", "u", "v", "node", "id", "node_id", "nodeid",
                 "label", "class", "split", "set", "head", "tail", "node1", "node2", "name"}


@dataclass(frozen=True)
class TableFormat:
    """How a table is laid out: delimiter (None = whitespace), lines to skip, column names, column count."""

    delimiter: str | None
    skiprows: int
    columns: tuple[str, ...] | None
    num_columns: int


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _split(line: str, delimiter: str | None) -> list[str]:
    return [f.strip() for f in (line.split(delimiter) if delimiter else line.split())]


def sniff(path: Path, delimiter: str | None = None, header: bool | None = None) -> TableFormat:
    """Work out a table's delimiter, header and column count from its first lines."""
    require_file(path, "a text table (CSV/TSV)")
    try:
        with open(path, encoding="utf-8") as fh:  # the first two rows that are neither blank nor comments
            rows = list(itertools.islice(((lineno, line.rstrip("\r\n")) for lineno, line in enumerate(fh)
                                          if line.strip() and not line.lstrip().startswith("#")), 2))
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not a UTF-8 text table (is it a binary file?)") from None
    if not rows:
        raise DatasetError(f"{path}: holds no rows")
    if delimiter is None:
        suffix = path.suffix.lower()
        first = rows[0][1]
        if suffix in (".tsv", ".tab") or "\t" in first:
            delimiter = "\t"
        elif suffix == ".csv" or "," in first:
            delimiter = ","
    first_fields = _split(rows[0][1], delimiter)
    if header is None:
        names_like = all(f.lower() in _HEADER_WORDS or f.lower().startswith(("feat", "f_", "col")) for f in first_fields)
        second_numeric = len(rows) > 1 and any(_is_number(f) for f in _split(rows[1][1], delimiter))
        header = names_like or (not any(_is_number(f) for f in first_fields) and second_numeric)
    skiprows = rows[0][0] + 1 if header else rows[0][0]
    columns = tuple(first_fields) if header else None
    return TableFormat(delimiter=delimiter, skiprows=skiprows, columns=columns, num_columns=len(first_fields))


def _loadtxt(path: Path, fmt: TableFormat, usecols: tuple[int, ...] | int, dtype: type | str) -> np.ndarray:
    with warnings.catch_warnings():
        # Comment lines trigger numpy's "contained no data" notice; comments are part of the format.
        warnings.filterwarnings("ignore", message=".*contained no data.*")
        return np.loadtxt(path, dtype=dtype, delimiter=fmt.delimiter, comments="#", skiprows=fmt.skiprows,
                          usecols=usecols, ndmin=2 if isinstance(usecols, tuple) else 1, encoding="utf-8",
                          quotechar='"')


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _fields(line: str, delimiter: str | None) -> list[str]:
    """A data line's fields as ``np.loadtxt`` splits them (quotes, trailing ``#`` comments)."""
    line = line.split("#", 1)[0]
    if delimiter is None:
        return line.split()
    return [f.strip() for f in next(csv.reader([line], delimiter=delimiter, quotechar='"'))]


def accepts(field: str, kind: str) -> bool:
    """Whether ``field`` parses as ``kind`` ("integer", "number", "string") by numpy's parser."""
    if kind == "string":
        return True
    if kind == "integer":
        return _INTEGER.fullmatch(field) is not None
    try:
        float(field)
    except ValueError:
        return False
    return "_" not in field  # Python's float() takes 1_000, numpy's parser does not


def locate(path: Path, fmt: TableFormat, usecols: tuple[int, ...] | int, kind: str) -> tuple[int, int, str | None] | None:
    """The first data line where a column of ``usecols`` is missing or not ``kind`` ("integer", "number", "string").

    Returns ``(line, column, field)``, 1-based, with ``field`` ``None`` when the line has too few
    columns; ``None`` when every line is fine (numpy refused something else).
    """
    cols = (usecols,) if isinstance(usecols, int) else usecols
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if lineno <= fmt.skiprows or not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = _fields(line.rstrip("\r\n"), fmt.delimiter)
            if not fields:
                continue
            for col in cols:
                if col >= len(fields):
                    return lineno, len(fields), None
                if not accepts(fields[col], kind):
                    return lineno, col + 1, fields[col]
    return None


def shown(field: str) -> str:
    """A field for an error message: its repr, cut after 40 characters."""
    return repr(field if len(field) <= 40 else field[:40] + "...")


def parse_error(path: Path, fmt: TableFormat, usecols: tuple[int, ...] | int, kind: str, what: str,
                hint: str = "") -> DatasetError | None:
    """The one-line error naming the file, line and column of the first line a parser should have refused
    (see :func:`locate`); None when every line is fine by the format's rules."""
    found = locate(path, fmt, usecols, kind)
    if found is None:
        return None
    line, col, field = found
    if field is None:
        needed = (usecols if isinstance(usecols, int) else max(usecols)) + 1
        return DatasetError(f"{path}, line {line}: {col} column(s), expected at least {needed}")
    article = "an integer" if kind == "integer" else "a number"
    return DatasetError(f"{path}, line {line}, column {col}: {what} {shown(field)} is not {article}{hint}")


def _parse_error(path: Path, fmt: TableFormat, usecols: tuple[int, ...] | int, kind: str, what: str,
                 exc: ValueError, hint: str = "") -> DatasetError:
    """A one-line error naming the file, line and column, from a failed ``np.loadtxt``."""
    error = parse_error(path, fmt, usecols, kind, what, hint)
    if error is None:
        note = f" (data rows counted from 0 after {fmt.skiprows} skipped line(s))" if fmt.skiprows else ""
        return DatasetError(f"{path}: {exc}{note}")
    return error


def read_columns(path: Path, fmt: TableFormat, usecols: tuple[int, ...] | int, dtype: type | str) -> np.ndarray:
    """Columns ``usecols`` of the table as one array (2-D for a tuple); parse errors name the file and line."""
    try:
        return _loadtxt(path, fmt, usecols, dtype)
    except ValueError as exc:
        if np.dtype(dtype).kind == "U":  # strings parse always; what failed is the table's shape
            raise _parse_error(path, fmt, usecols, "string", "value", exc) from None
        kind = "integer" if np.issubdtype(np.dtype(dtype), np.integer) else "number"
        raise _parse_error(path, fmt, usecols, kind, "value", exc) from None


def read_ids(path: Path, fmt: TableFormat, usecols: tuple[int, ...] | int, string_ids: bool = False) -> np.ndarray:
    """Node id columns: int64, or strings with ``string_ids`` (every id, also numeric-looking ones).

    Raises:
        DatasetError: without ``string_ids``, a token that is not an integer, naming the file, line and
            column (and ``--string-ids``).
    """
    if string_ids:
        return read_columns(path, fmt, usecols, str)
    try:
        return _loadtxt(path, fmt, usecols, np.int64)
    except ValueError as exc:
        raise _parse_error(path, fmt, usecols, "integer", "node id", exc,
                           hint=" (ids are integers unless you give --string-ids)") from None
