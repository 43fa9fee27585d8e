"""Encoding of the feature-shard messages' array payloads.

Ids travel as packed little-endian int64 and rows as raw little-endian bytes with a dtype and a shape
(``protos/saintpipe/protos/feature_shard.proto``).

``GatherChunk`` is the hot path (megabytes per message), so the generated class never touches the row
bytes: it serializes the small fields, the ``rows`` field (tag 2, length-delimited) is appended by hand,
and the decoder walks the wire format with :mod:`saintpipe.core.protowire` and returns a zero-copy view
of the rows (the generated class would copy every payload four more times). The bytes are an ordinary
``GatherChunk`` message; tests check both directions against the generated class.

:func:`allocate_chunk` saves one copy more on the server: gRPC's Python runtime only sends ``bytes``, so
it creates the message's ``bytes`` object first (uninitialized, through the C API's
``PyBytes_FromStringAndSize(NULL, n)``) and hands back a writable view of the rows field for the gather
to fill. A ``padding`` field places the rows 16 bytes aligned (numpy's gather into an unaligned view is
twice as slow).
"""

from __future__ import annotations

import ctypes

import numpy as np

from saintpipe.core import protowire as pw
from saintpipe.core.errors import DecodeError
from saintpipe.protos import feature_shard_pb2 as pb

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["FeatureShard"].full_name
# Dtypes a shard may store or send; always little-endian on the wire.
WIRE_DTYPES: dict[str, np.dtype] = {"float32": np.dtype("<f4"), "float16": np.dtype("<f2")}
_ROWS_TAG = pw.tag(2, pw.LEN)
_PADDING_TAG = pw.tag(5, pw.LEN)
# Bytes a GatherChunk needs beside its rows (offset, dtype, shape, padding, tags), with room to spare.
CHUNK_OVERHEAD = 256
ROWS_ALIGNMENT = 16  # CPython's bytes data is 16-byte aligned, so this holds on both ends

_bytes_from_size = ctypes.pythonapi.PyBytes_FromStringAndSize
_bytes_from_size.restype = ctypes.py_object
_bytes_from_size.argtypes = (ctypes.c_char_p, ctypes.c_ssize_t)
_bytes_address = ctypes.pythonapi.PyBytes_AsString
_bytes_address.restype = ctypes.c_void_p
_bytes_address.argtypes = (ctypes.py_object,)


def encode_ids(ids: np.ndarray) -> bytes:
    """Node ids as packed little-endian int64 bytes."""
    return np.ascontiguousarray(ids, dtype="<i8").tobytes()


def decode_ids(data: bytes) -> np.ndarray:
    """Packed little-endian int64 bytes -> a read-only int64 array (no copy).

    Raises:
        DecodeError: the byte count is not a multiple of 8.
    """
    if len(data) % 8:
        raise DecodeError(f"GatherRequest.ids: {len(data)} bytes is not a whole number of int64 ids")
    return np.frombuffer(data, dtype="<i8")


def allocate_chunk(offset: int, rows: int, dim: int, dtype: np.dtype) -> tuple[bytes, np.ndarray]:
    """A serialized ``GatherChunk`` of ``rows`` x ``dim`` rows whose row bytes are still to be written.

    Returns ``(message, view)``: ``view`` is a writable ``[rows, dim]`` array of
    ``dtype`` over the message's ``rows`` field, 16-byte aligned. Fill all of it
    before the message leaves the caller's hands (the bytes start
    uninitialized), then drop the view; it must not outlive ``message``.
    """
    dtype = np.dtype(dtype)
    if dtype.name not in WIRE_DTYPES:
        raise ValueError(f"cannot encode rows of dtype {dtype}")
    dtype = WIRE_DTYPES[dtype.name]
    head = pb.GatherChunk(offset=offset, dtype=dtype.name, shape=(rows, dim)).SerializeToString()
    payload = rows * dim * dtype.itemsize
    rows_key = _ROWS_TAG + pw.varint(payload)
    pad = -(len(head) + 2 + len(rows_key)) % ROWS_ALIGNMENT  # 2: padding's tag and one-byte length
    prefix = b"".join((head, _PADDING_TAG, bytes([pad]), bytes(pad), rows_key))
    message = _bytes_from_size(None, len(prefix) + payload)
    whole = np.ctypeslib.as_array((ctypes.c_ubyte * len(message)).from_address(_bytes_address(message)))
    whole[: len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    view = whole[len(prefix) :].view(dtype).reshape(rows, dim)
    return message, view


# What decode errors call GatherChunk's fields.
_NAMES = {1: "GatherChunk.offset", 2: "GatherChunk.rows", 3: "GatherChunk.dtype", 4: "GatherChunk.shape"}


def _decode_fields(data: bytes) -> tuple[int, memoryview | None, str, list[int]]:
    """Walk the wire format of a GatherChunk: (offset, rows bytes, dtype, shape).

    Protobuf's rules: a field repeated takes its last value (``shape`` collects,
    packed or not), a known field of another wire type is skipped like an
    unknown one.
    """
    offset, rows, dtype, shape = 0, None, "", []
    for field, wire_type, value, length in pw.iter_fields(data, 0, len(data), "GatherChunk", _NAMES):
        if wire_type == pw.LEN:
            if field == 2:
                rows = memoryview(data)[value : value + length]
            elif field == 4:  # packed repeated int64
                shape += pw.packed_int64(data, value, value + length, _NAMES[4])
            elif field == 3:
                dtype = bytes(data[value : value + length]).decode("utf-8", errors="replace")
        elif wire_type == pw.VARINT:
            if field == 1:
                offset = value
            elif field == 4:
                shape.append(pw.signed(value))
    return offset, rows, dtype, shape


def decode_chunk(data: bytes) -> tuple[int, np.ndarray]:
    """A serialized ``GatherChunk`` -> (offset, rows) with rows a read-only view of ``data``.

    Raises:
        DecodeError: naming the field that is malformed (dtype, shape, rows).
    """
    offset, rows, dtype_name, shape = _decode_fields(data)
    dtype = WIRE_DTYPES.get(dtype_name)
    if dtype is None:
        raise DecodeError(f"unknown dtype {dtype_name!r} (expected one of {sorted(WIRE_DTYPES)})")
    if len(shape) != 2 or min(shape) < 0:
        raise DecodeError(f"GatherChunk.shape: expected [rows, dim], got {shape}")
    expected = shape[0] * shape[1] * dtype.itemsize
    got = 0 if rows is None else rows.nbytes
    if got != expected:
        raise DecodeError(
            f"GatherChunk.rows: {got} bytes, but shape {shape} of {dtype_name} needs {expected}"
        )
    if rows is None:
        return offset, np.empty(shape, dtype=dtype)
    return offset, np.frombuffer(rows, dtype=dtype).reshape(shape)
