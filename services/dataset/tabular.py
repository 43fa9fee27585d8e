"""Reading delimited text tables (edge lists and keyed side files) with numpy's C parser.

Format rules: lines starting with ``#`` are comments; the delimiter is a tab
for ``.tsv``/``.tab``, a comma for ``.csv``, otherwise sniffed from the first
line (tab, comma, else runs of whitespace, as in SNAP edge lists). A header
row is detected when the first row's fields are all non-numeric while the
second row has a numeric field, or the first row's fields are common column
names (src, dst, source, target, id, ...); ``header=True/False`` overrides.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import warnings

import numpy as np

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.input_files import require_file

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
    rows: list[tuple[int, str]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh):
                if line.strip() and not line.lstrip().startswith("#"):
                    rows.append((lineno, line.rstrip("\r\n")))
                    if len(rows) == 2:
                        break
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


def read_columns(path: Path, fmt: TableFormat, usecols: tuple[int, ...] | int, dtype: type | str) -> np.ndarray:
    """Columns ``usecols`` of the table as one array (2-D for a tuple); parse errors name the file and row."""
    try:
        return _loadtxt(path, fmt, usecols, dtype)
    except ValueError as exc:
        note = f" (data rows counted from 0 after {fmt.skiprows} skipped line(s))" if fmt.skiprows else ""
        raise DatasetError(f"{path}: {exc}{note}") from None


def read_ids(path: Path, fmt: TableFormat, usecols: tuple[int, ...] | int) -> np.ndarray:
    """Node id columns: int64 when every id is an integer, else strings."""
    try:
        return _loadtxt(path, fmt, usecols, np.int64)
    except ValueError:
        return read_columns(path, fmt, usecols, str)
