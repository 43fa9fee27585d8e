"""Bytes -> Subgraph: the decoding half of :mod:`saintpipe.services.pool.codec` (which re-exports it).

Decoding copies nothing: the arrays it returns are read-only numpy views of
the message's own bytes, aligned because the encoder pads each ``data`` field
to a multiple of 8 bytes from the message start.

Two walks of the message, one reader: the compiled walk (``scan``, inside the
one compiled pass ``fused.check_message`` that also hashes and checks) runs
first and only says "valid" or not; the Python walk over
:mod:`saintpipe.core.protowire` (the shared hand-written reader, whose
docstring has the figures that justify both walks) runs when it says not, and
names the field at fault. Every malformation (a broken frame, a wrong format
version, a missing or repeated field, a dtype or length mismatch, a
non-monotone ``indptr``, an index out of range, a checksum mismatch) raises
:class:`~saintpipe.core.errors.DecodeError` naming the field.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from saintpipe.services.pool.codec import fused, scan
from saintpipe.services.pool.codec.schema import ARRAYS, FORMAT_VERSION, checksum
from saintpipe.services.pool.codec.validate import check_subgraph_arrays

from saintpipe.core import protowire as pw
from saintpipe.core.errors import DecodeError
from saintpipe.core.subgraph import Subgraph

# Scalar fields: number -> (name, wire type).
_SCALARS = {
    1: ("format_version", pw.VARINT),
    2: ("job_id", pw.LEN),
    3: ("worker", pw.VARINT),
    4: ("sequence", pw.VARINT),
    5: ("seed", pw.VARINT),
    12: ("checksum", pw.I64),
}
_BY_NUMBER = {num: name for name, (num, _) in ARRAYS.items()}
# What errors call each field: the message's own, then each Array's.
_NAMES = {num: f"subgraph {name}" for num, (name, _) in _SCALARS.items()} | {
    num: f"subgraph {name}" for num, name in _BY_NUMBER.items()
}
_ARRAY_FIELDS = ("dtype", "shape", "padding", "data")
_ARRAY_NAMES = {name: {i + 1: f"subgraph {name}.{f}" for i, f in enumerate(_ARRAY_FIELDS)} for name in ARRAYS}
_U64_MASK = (1 << 64) - 1


def decode_subgraph(data: bytes | bytearray | memoryview) -> Subgraph:
    """Parse and validate the bytes of a ``saintpipe.protos.Subgraph`` message.

    Args:
        data: the encoded message. ``bytes`` is mapped in place; other buffers are
            copied once (the subgraph must not change when the caller reuses them).

    Returns:
        The subgraph; its arrays are read-only numpy views of ``data``.

    Raises:
        DecodeError: naming the field that is wrong.
    """
    return decode_owned(data if isinstance(data, bytes) else bytes(data))


def decode_owned(buf: bytes | bytearray | memoryview) -> Subgraph:
    """``decode_subgraph`` without the copy, for a buffer nobody else will write to.

    The pool decodes the buffer it has just received a message into; the
    subgraph's arrays become read-only views of it.
    """
    raw = np.frombuffer(buf, dtype=np.uint8)
    raw.flags.writeable = False  # one compiled specialization for bytes and for received buffers
    table = np.empty(scan.TABLE_SIZE, dtype=np.int64)
    if fused.AVAILABLE:
        status = fused.check_message(raw, table)
        if status == fused.OK:  # framed, hashed and checked in one compiled pass
            meta, arrays = fields_from_table(buf, table)
            return Subgraph(job_id=meta[0], worker=meta[1], sequence=meta[2], seed=meta[3], **arrays)
        framed = status != fused.INVALID
    else:
        framed = scan.scan(raw, table)
    if framed:  # well framed: the compiled walk found every field
        return _checked(*fields_from_table(buf, table))
    # The Python walk names what is wrong (or decodes what the compiled walk does not handle).
    return _checked(*fields(buf))


def decode_walked(buf: bytes | bytearray | memoryview) -> Subgraph:
    """``decode_owned`` by the Python walk alone: the reference the compiled path is tested and measured against."""
    return _checked(*fields(buf))


def _checked(meta: tuple, arrays: dict[str, np.ndarray]) -> Subgraph:
    """The subgraph of a walked message once its checksum and structure are checked; DecodeError if not."""
    expected = checksum(FORMAT_VERSION, meta[:4], arrays)
    if meta[4] != expected:
        raise DecodeError(
            f"subgraph checksum: message says {meta[4]:#018x}, its contents hash to "
            f"{expected:#018x} (the message was corrupted)"
        )
    check_subgraph_arrays(arrays)
    return Subgraph(job_id=meta[0], worker=meta[1], sequence=meta[2], seed=meta[3], **arrays)


def fields_from_table(buf: bytes | bytearray | memoryview, table: np.ndarray) -> tuple[tuple, dict]:
    """The metadata (job, worker, sequence, seed, checksum) and array views located by ``scan``."""
    t = table.tolist()
    job_id = _job_id(buf, t[scan.T_JOB_AT], t[scan.T_JOB_LEN])
    meta = (
        job_id,
        pw.signed(t[scan.T_WORKER] & _U64_MASK),
        pw.signed(t[scan.T_SEQUENCE] & _U64_MASK),
        t[scan.T_SEED] & _U64_MASK,
        t[scan.T_CHECKSUM] & _U64_MASK,
    )
    arrays = {
        name: _view(buf, dtype, t[at], t[at + 1])
        for (name, dtype), at in zip(_DTYPES, _TABLE_AT, strict=True)
    }
    return meta, arrays


_DTYPES = [(name, dtype) for name, (_, dtype) in ARRAYS.items()]
_TABLE_AT = [scan.T_ARRAYS + 3 * i for i in range(len(ARRAYS))]


def fields(buf: bytes | bytearray | memoryview) -> tuple[tuple, dict]:
    """The same as ``fields_from_table`` by a Python walk of the message, raising on anything wrong."""
    scalars: dict[str, Any] = {}  # a number, or (offset, length) of a LEN field
    arrays: dict[str, np.ndarray] = {}
    for number, wire_type, value, length in pw.iter_fields(buf, 0, len(buf), "subgraph message", _NAMES):
        if number in _SCALARS:
            name, want = _SCALARS[number]
            _expect(name, wire_type, want, name in scalars)
            scalars[name] = value if wire_type != pw.LEN else (value, length)
        elif number in _BY_NUMBER:
            name = _BY_NUMBER[number]
            _expect(name, wire_type, pw.LEN, name in arrays)
            arrays[name] = _read_array(buf, name, value, length)
        # Unknown fields are skipped, as protobuf readers do.
    version = scalars.get("format_version", 0)
    if version != FORMAT_VERSION:
        hint = " (version 2 is a node set: compact.decode_entry reads it)" if version == 2 else ""
        raise DecodeError(f"subgraph format_version: got {version}, this decoder reads {FORMAT_VERSION}{hint}")
    for name in ARRAYS:
        if name not in arrays:
            raise DecodeError(f"subgraph {name}: missing")
    job_id = _job_id(buf, *scalars["job_id"]) if "job_id" in scalars else ""
    meta = (
        job_id,
        pw.signed(scalars.get("worker", 0)),
        pw.signed(scalars.get("sequence", 0)),
        scalars.get("seed", 0),
        scalars.get("checksum", 0),
    )
    return meta, {name: arrays[name] for name in ARRAYS}


def _job_id(buf: bytes | bytearray | memoryview, offset: int, length: int) -> str:
    try:
        return bytes(buf[offset : offset + length]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"subgraph job_id: not valid UTF-8 ({exc})") from None


def _view(buf: bytes | bytearray | memoryview, dtype: np.dtype, count: int, offset: int) -> np.ndarray:
    """A read-only view of ``count`` items at ``offset``, copied once if it is not aligned."""
    arr = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    if not arr.flags.aligned:  # not padded by this encoder: copy once rather than hand out an unaligned view
        arr = arr.copy()
    arr.flags.writeable = False
    return arr


def _expect(name: str, wire_type: int, want: int, seen: bool) -> None:
    if wire_type != want:
        raise DecodeError(f"subgraph {name}: wire type {wire_type}, expected {want}")
    if seen:
        raise DecodeError(f"subgraph {name}: appears more than once")


def _read_array(buf: bytes | bytearray | memoryview, name: str, start: int, length: int) -> np.ndarray:
    """A read-only view of the Array message at ``buf[start:start+length]``."""
    want = ARRAYS[name][1]
    dtype = None
    shape: list[int] = []
    data = (start, 0)
    seen: set[int] = set()
    names = _ARRAY_NAMES[name]
    for number, wire_type, value, size in pw.iter_fields(buf, start, start + length, f"subgraph {name}", names):
        if number == 2 and wire_type == pw.VARINT:  # an unpacked repeated shape is legal protobuf
            shape.append(pw.signed(value))
            continue
        if number in names:
            _expect(f"{name}.{_ARRAY_FIELDS[number - 1]}", wire_type, pw.LEN, number in seen)
            seen.add(number)
        if number == 1:
            dtype = buf[value : value + size]
        elif number == 2:
            shape += pw.packed_int64(buf, value, value + size, names[2])
        elif number == 4:
            data = (value, size)
    if dtype is None or bytes(dtype) != want.str.encode():
        got = "missing" if dtype is None else repr(bytes(dtype).decode("utf-8", "replace"))
        raise DecodeError(f"subgraph {name}.dtype: got {got}, expected {want.str!r}")
    if len(shape) != 1 or shape[0] < 0:
        raise DecodeError(f"subgraph {name}.shape: expected one non-negative length, got {shape}")
    offset, nbytes = data
    if nbytes != shape[0] * want.itemsize:
        raise DecodeError(
            f"subgraph {name}.data: shape {shape} of {want.str} needs {shape[0] * want.itemsize} "
            f"bytes, got {nbytes}"
        )
    return _view(buf, want, shape[0], offset)
