"""Subgraph <-> bytes: the ``saintpipe.protos.Subgraph`` message (protos/saintpipe/protos/subgraph.proto).

Arrays travel as raw little-endian bytes with a dtype and a shape. Encoding
copies each array once (into the message); decoding copies nothing: the
arrays it returns are read-only numpy views of the message's own bytes,
aligned because the encoder pads each ``data`` field to a multiple of 8 bytes
from the message start. Copy an array before writing to it.

The bytes are exactly what the generated ``subgraph_pb2.Subgraph`` serializes
(field order, defaults omitted), and any protobuf reader can parse them; the
framing is done here only to avoid the generated classes' copies (see
:mod:`services.pool.wire`).

The decoder trusts nothing: every malformation (a broken frame, a wrong format
version, a missing or repeated field, a dtype or length mismatch, a
non-monotone ``indptr``, an index out of range, a checksum mismatch) raises
:class:`~saintpipe.errors.DecodeError` naming the field at fault. The XXH3-64
checksum covers every field but the padding, so a corrupted message is rejected
rather than decoded into a subgraph other than the one encoded.
"""

from __future__ import annotations

import struct

import numpy as np
import xxhash

from saintpipe.errors import DecodeError, InvalidArgument
from services.pool import wire
from services.pool.validate import check_subgraph_arrays
from services.subgraph import Subgraph

FORMAT_VERSION = 1
ALIGN = 8

# Array fields: name -> (field number in Subgraph, the one dtype it travels as).
ARRAYS: dict[str, tuple[int, np.dtype]] = {
    "node_ids": (6, np.dtype("<i8")),
    "indptr": (7, np.dtype("<i8")),
    "indices": (8, np.dtype("<i4")),
    "edge_weights": (9, np.dtype("<f4")),
    "edge_weights_t": (10, np.dtype("<f4")),
    "loss_weights": (11, np.dtype("<f4")),
}
# Scalar fields: number -> (name, wire type).
_SCALARS = {
    1: ("format_version", wire.VARINT),
    2: ("job_id", wire.LEN),
    3: ("worker", wire.VARINT),
    4: ("sequence", wire.VARINT),
    5: ("seed", wire.VARINT),
    12: ("checksum", wire.I64),
}
_BY_NUMBER = {num: name for name, (num, _) in ARRAYS.items()}
_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)


def encode_subgraph(sg: Subgraph, *, validate: bool = True) -> bytes:
    """Serialize a subgraph into the bytes of a ``saintpipe.protos.Subgraph`` message.

    See :func:`encode_subgraph_parts` for the arguments and errors.
    """
    return b"".join(encode_subgraph_parts(sg, validate=validate))


def encode_subgraph_parts(sg: Subgraph, *, validate: bool = True) -> list[bytes | memoryview]:
    """The encoded message as a list of pieces whose concatenation is ``encode_subgraph(sg)``.

    The array pieces are memoryviews of the subgraph's own arrays (no copy), so
    a writer can send them straight to a socket; keep ``sg`` unchanged until then.

    Arrays whose dtype casts safely to the wire dtype (e.g. int32 node ids) are
    converted; anything else is refused rather than silently rounded.

    Args:
        sg: the subgraph.
        validate: run the decoder's structural checks first, so a broken
            subgraph fails at its producer rather than at every trainer.

    Returns:
        The pieces of the encoded message.

    Raises:
        InvalidArgument: naming the field that is malformed, out of range or of the wrong dtype.
    """
    arrays = {name: _wire_array(name, getattr(sg, name)) for name in ARRAYS}
    for name, value, (lo, hi) in (
        ("worker", sg.worker, _INT64),
        ("sequence", sg.sequence, _INT64),
        ("seed", sg.seed, _UINT64),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= int(value) <= hi:
            raise InvalidArgument(f"subgraph {name}: {value!r} is not an integer in [{lo}, {hi}]")
    if not isinstance(sg.job_id, str):
        raise InvalidArgument(f"subgraph job_id: expected a string, got {type(sg.job_id).__name__}")
    meta = (sg.job_id, int(sg.worker), int(sg.sequence), int(sg.seed))
    if validate:
        try:
            check_subgraph_arrays(arrays)
        except DecodeError as exc:
            raise InvalidArgument(f"cannot encode: {exc}") from None
    try:
        job = meta[0].encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"subgraph job_id: not encodable as UTF-8 ({exc})") from None

    # Scalars first (field order), proto3 style: fields equal to their default are omitted.
    parts: list = [wire.tag(1, wire.VARINT), wire.varint(FORMAT_VERSION)]
    if job:
        parts += [wire.tag(2, wire.LEN), wire.varint(len(job)), job]
    for number, value in ((3, meta[1]), (4, meta[2]), (5, meta[3])):
        if value:
            parts += [wire.tag(number, wire.VARINT), wire.varint(wire.unsigned(value))]
    pos = sum(len(p) for p in parts)
    for name, (number, dtype) in ARRAYS.items():
        arr = arrays[name]
        framed = _frame_array(number, arr, pos)
        parts += framed
        pos += sum(len(p) if isinstance(p, bytes) else p.nbytes for p in framed)
    checksum = _checksum(FORMAT_VERSION, meta, arrays)
    if checksum:
        parts += [wire.tag(12, wire.I64), struct.pack("<Q", checksum)]
    return parts


def _frame_array(number: int, arr: np.ndarray, pos: int) -> list:
    """The pieces of Subgraph field ``number`` holding ``arr``, starting at message offset ``pos``.

    Picks the padding field's size so that the array's bytes start at a multiple
    of ALIGN from the message start.
    """
    dtype = arr.dtype.str.encode()
    shape = wire.varint(arr.size)
    header = b"".join(
        (_DTYPE_KEY, wire.varint(len(dtype)), dtype, _SHAPE_KEY, wire.varint(len(shape)), shape)
    )
    outer_key = _FIELD_KEYS[number]
    if arr.nbytes == 0:  # proto3 omits an empty bytes field; nothing to align
        return [outer_key + wire.varint(len(header)) + header]
    data_key = _DATA_KEY + wire.varint(arr.nbytes)
    fixed = len(header) + len(data_key)
    # A padding field of p zero bytes takes 2 + p bytes on the wire (absent when p = 0).
    for pad_field in _PAD_SIZES:
        size = fixed + pad_field + arr.nbytes
        if (pos + len(outer_key) + wire.varint_size(size) + fixed + pad_field) % ALIGN == 0:
            break
    padding = _PADDINGS[pad_field]
    return [b"".join((outer_key, wire.varint(size), header, padding, data_key)), memoryview(arr).cast("B")]


_FIELD_KEYS = {number: wire.tag(number, wire.LEN) for number, _ in ARRAYS.values()}
_DTYPE_KEY, _SHAPE_KEY, _DATA_KEY = wire.tag(1, wire.LEN), wire.tag(2, wire.LEN), wire.tag(4, wire.LEN)
_PAD_SIZES = (0, *range(3, 3 + ALIGN))
_PADDINGS = {p: (wire.tag(3, wire.LEN) + wire.varint(p - 2) + bytes(p - 2)) if p else b"" for p in _PAD_SIZES}


def decode_subgraph(data: bytes | bytearray | memoryview) -> Subgraph:
    """Parse and validate the bytes of a ``saintpipe.protos.Subgraph`` message.

    Args:
        data: the encoded message. ``bytes`` is mapped in place; other buffers are copied once.

    Returns:
        The subgraph; its arrays are read-only numpy views of ``data``.

    Raises:
        DecodeError: naming the field that is wrong.
    """
    buf = data if isinstance(data, bytes) else bytes(data)
    scalars: dict[str, int] = {}
    arrays: dict[str, np.ndarray] = {}
    for number, wire_type, value, length in wire.iter_fields(buf, 0, len(buf), "subgraph message"):
        if number in _SCALARS:
            name, want = _SCALARS[number]
            _expect(name, wire_type, want, name in scalars)
            scalars[name] = value if wire_type != wire.LEN else (value, length)
        elif number in _BY_NUMBER:
            name = _BY_NUMBER[number]
            _expect(name, wire_type, wire.LEN, name in arrays)
            arrays[name] = _read_array(buf, name, value, length)
        # Unknown fields are skipped, as protobuf readers do.
    version = scalars.get("format_version", 0)
    if version != FORMAT_VERSION:
        raise DecodeError(f"subgraph format_version: got {version}, this decoder reads {FORMAT_VERSION}")
    for name in ARRAYS:
        if name not in arrays:
            raise DecodeError(f"subgraph {name}: missing")
    job_id = ""
    if "job_id" in scalars:
        offset, length = scalars["job_id"]
        try:
            job_id = buf[offset : offset + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"subgraph job_id: not valid UTF-8 ({exc})") from None
    meta = (
        job_id,
        wire.signed(scalars.get("worker", 0)),
        wire.signed(scalars.get("sequence", 0)),
        scalars.get("seed", 0),
    )
    expected = _checksum(version, meta, arrays)
    if scalars.get("checksum", 0) != expected:
        raise DecodeError(
            f"subgraph checksum: message says {scalars.get('checksum', 0):#018x}, its contents hash to "
            f"{expected:#018x} (the message was corrupted)"
        )
    check_subgraph_arrays(arrays)
    return Subgraph(job_id=meta[0], worker=meta[1], sequence=meta[2], seed=meta[3], **arrays)


def _expect(name: str, wire_type: int, want: int, seen: bool) -> None:
    if wire_type != want:
        raise DecodeError(f"subgraph {name}: wire type {wire_type}, expected {want}")
    if seen:
        raise DecodeError(f"subgraph {name}: appears more than once")


def _read_array(buf: bytes, name: str, start: int, length: int) -> np.ndarray:
    """A read-only view of the Array message at ``buf[start:start+length]``."""
    want = ARRAYS[name][1]
    dtype = None
    shape: list[int] = []
    data = (start, 0)
    seen: set[int] = set()
    for number, wire_type, value, size in wire.iter_fields(buf, start, start + length, f"subgraph {name}"):
        if number == 2 and wire_type == wire.VARINT:  # an unpacked repeated shape is legal protobuf
            shape.append(wire.signed(value))
            continue
        if number in (1, 2, 3, 4):
            field = ("dtype", "shape", "padding", "data")[number - 1]
            if wire_type != wire.LEN:
                raise DecodeError(f"subgraph {name}.{field}: wire type {wire_type}, expected {wire.LEN}")
            if number in seen:
                raise DecodeError(f"subgraph {name}.{field}: appears more than once")
            seen.add(number)
        if number == 1:
            dtype = buf[value : value + size]
        elif number == 2:
            pos, end = value, value + size
            while pos < end:
                item, pos = wire.read_varint(buf, pos, end, f"subgraph {name}.shape")
                shape.append(wire.signed(item))
        elif number == 4:
            data = (value, size)
    if dtype != want.str.encode():
        got = "missing" if dtype is None else repr(dtype.decode("utf-8", "replace"))
        raise DecodeError(f"subgraph {name}.dtype: got {got}, expected {want.str!r}")
    if len(shape) != 1 or shape[0] < 0:
        raise DecodeError(f"subgraph {name}.shape: expected one non-negative length, got {shape}")
    offset, nbytes = data
    if nbytes != shape[0] * want.itemsize:
        raise DecodeError(
            f"subgraph {name}.data: shape {shape} of {want.str} needs {shape[0] * want.itemsize} "
            f"bytes, got {nbytes}"
        )
    arr = np.frombuffer(buf, dtype=want, count=shape[0], offset=offset)
    if not arr.flags.aligned:  # not padded by this encoder: copy once rather than hand out an unaligned view
        arr = arr.copy()
        arr.flags.writeable = False
    return arr


def _wire_array(name: str, value: object) -> np.ndarray:
    """The array as it goes on the wire: 1-D, C-contiguous, explicit little-endian wire dtype."""
    target = ARRAYS[name][1]
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise InvalidArgument(f"subgraph {name}: expected a 1-D array, got shape {arr.shape}")
    if not np.can_cast(arr.dtype, target, casting="safe"):
        raise InvalidArgument(
            f"subgraph {name}: dtype {arr.dtype} does not convert losslessly to {target.str}"
        )
    return np.ascontiguousarray(arr, dtype=target)


def _checksum(version: int, meta: tuple[str, int, int, int], arrays: dict[str, np.ndarray]) -> int:
    """XXH3-64 over version, ids, then each array's dtype, length and bytes (padding excluded)."""
    job = meta[0].encode("utf-8")
    h = xxhash.xxh3_64(struct.pack("<IQqqQ", version, len(job), meta[1], meta[2], meta[3]) + job)
    for name in ARRAYS:
        arr = arrays[name]
        h.update(struct.pack("<4sQ", arr.dtype.str.encode(), arr.size))
        h.update(memoryview(arr).cast("B"))
    return h.intdigest()
