"""Subgraph <-> bytes: the ``saintpipe.protos.Subgraph`` message (protos/saintpipe/protos/subgraph.proto).

Arrays travel as raw little-endian bytes with a dtype and a shape. Encoding
copies each array once (into the message); decoding copies nothing: the
arrays it returns are read-only numpy views of the message's own bytes,
aligned because the encoder pads each ``data`` field to a multiple of 8 bytes
from the message start. Copy an array before writing to it.

The bytes are exactly what the generated ``subgraph_pb2.Subgraph`` serializes
(field order, defaults omitted), and any protobuf reader can parse them; the
framing is done here only to avoid the generated classes' copies (see
:mod:`saintpipe.services.pool.wire`).

The decoder trusts nothing: every malformation (a broken frame, a wrong format
version, a missing or repeated field, a dtype or length mismatch, a
non-monotone ``indptr``, an index out of range, a checksum mismatch) raises
:class:`~saintpipe.core.errors.DecodeError` naming the field at fault. The XXH3-64
checksum covers every field but the padding, so a corrupted message is rejected
rather than decoded into a subgraph other than the one encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import xxhash

from saintpipe.core.errors import DecodeError, InvalidArgument
from saintpipe.services.pool import fused, scan, wire
from saintpipe.services.pool.validate import check_subgraph_arrays
from saintpipe.core.subgraph import Subgraph

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
    job, meta, arrays = _prepare(sg)
    if fused.AVAILABLE:  # one compiled pass: frame, hash and check
        parts = _encode_fused(job, meta, arrays, validate)
        if parts is not None:
            return parts
    if validate:
        try:
            check_subgraph_arrays(arrays)
        except DecodeError as exc:
            raise InvalidArgument(f"cannot encode: {exc}") from None
    # Scalars first (field order), proto3 style: fields equal to their default are omitted.
    head = bytearray(_VERSION_FIELD)
    if job:
        head += _JOB_KEY + wire.varint(len(job)) + job
    for key, value in ((_WORKER_KEY, meta[1]), (_SEQUENCE_KEY, meta[2]), (_SEED_KEY, meta[3])):
        if value:
            head += key + wire.varint(wire.unsigned(value))
    pos = len(head)
    parts: list = [bytes(head)]
    for name, (number, _) in ARRAYS.items():
        arr = arrays[name]
        header = _array_header(number, arr, pos)
        parts.append(header)
        pos += len(header)
        if arr.nbytes:
            parts.append(memoryview(arr).cast("B"))
            pos += arr.nbytes
    checksum = _checksum(FORMAT_VERSION, meta, arrays)
    if checksum:
        parts.append(_CHECKSUM_KEY + struct.pack("<Q", checksum))
    return parts


def _prepare(sg: Subgraph) -> tuple[bytes, tuple[str, int, int, int], dict[str, np.ndarray]]:
    """The job id's UTF-8 bytes, the metadata and the wire arrays of ``sg``; InvalidArgument if unfit."""
    arrays = {name: _wire_array(name, getattr(sg, name)) for name in ARRAYS}
    job, meta = _meta(sg.job_id, sg.worker, sg.sequence, sg.seed)
    return job, meta, arrays


def _meta(job_id: object, worker: object, sequence: object, seed: object) -> tuple[bytes, tuple[str, int, int, int]]:
    """The job id's UTF-8 bytes and the checked metadata; InvalidArgument if unfit."""
    for name, value, (lo, hi) in (
        ("worker", worker, _INT64),
        ("sequence", sequence, _INT64),
        ("seed", seed, _UINT64),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= int(value) <= hi:
            raise InvalidArgument(f"subgraph {name}: {value!r} is not an integer in [{lo}, {hi}]")
    if not isinstance(job_id, str):
        raise InvalidArgument(f"subgraph job_id: expected a string, got {type(job_id).__name__}")
    meta = (job_id, int(worker), int(sequence), int(seed))
    try:
        job = job_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"subgraph job_id: not encodable as UTF-8 ({exc})") from None
    return job, meta


def encode_subgraph_into(
    sg: Subgraph, allocate: Callable[[int], np.ndarray], *, validate: bool = True
) -> int:
    """Encode ``sg`` straight into a buffer, e.g. a shared-memory file: one pass over the arrays.

    ``allocate(size)`` is called once, before the arrays are read, and must
    return a writable, C-contiguous ``uint8`` array of at least ``size`` bytes;
    the message is written to its first ``nbytes`` bytes. ``nbytes`` is
    ``size``, except 9 bytes less in the 1-in-2**64 case of a zero checksum
    (proto3 omits the field). The bytes are exactly
    ``encode_subgraph(sg, validate=validate)``. On the compiled path each array
    is hashed, checked and copied while it is in cache, saving the second read
    of the arrays that copying ``encode_subgraph_parts`` would take; the stores
    into the buffer still cost what they cost (docs/pool.md has figures).

    Args:
        sg: the subgraph.
        allocate: gives the destination buffer for a message of ``size`` bytes.
        validate: as for :func:`encode_subgraph_parts`.

    Returns:
        nbytes, the length of the message written at the start of the buffer.

    Raises:
        InvalidArgument: as :func:`encode_subgraph_parts`, or when the buffer is
            unfit (too small, not uint8, read-only, not contiguous). ``allocate``
            may already have been called when a check of the arrays fails: the
            buffer then holds garbage, and the caller should discard it.
    """
    job, meta, arrays = _prepare(sg)
    dest = None
    if fused.AVAILABLE:  # frame, allocate, then one compiled pass: hash, check and copy each array
        job_array = np.frombuffer(job, dtype=np.uint8)
        scalars = (np.uint64(wire.unsigned(meta[1])), np.uint64(wire.unsigned(meta[2])), np.uint64(meta[3]))
        views = [_read_only(a) for a in arrays.values()]
        arena = np.empty(fused.ARENA + len(job), dtype=np.uint8)
        cuts = np.empty(8, dtype=np.int64)
        size = int(fused.layout(job_array, *scalars, *views, arena, cuts))  # reads no array contents
        dest = _destination(allocate(size), size)
        status = fused.fill(job_array, *scalars, *views, bool(validate), arena, cuts, dest, fused.COPY_ALL)
        if status == fused.INVALID:
            _refuse(arrays)
        if status == fused.OK:
            return size - 9 + int(cuts[7] - cuts[6])
    # The Python path (or the kernel could not run: then into the buffer already allocated, as long or longer).
    parts = encode_subgraph_parts(sg, validate=validate)
    size = sum(memoryview(p).nbytes for p in parts)
    dest = _destination(allocate(size) if dest is None else dest, size)
    at = 0
    for part in parts:
        piece = np.frombuffer(part, dtype=np.uint8)
        dest[at : at + piece.size] = piece
        at += piece.size
    return at


# Whether frame_subgraph/seal_subgraph can run (they need the compiled framing and hashing).
DIRECT_AVAILABLE = fused.AVAILABLE
_I8, _I4, _F4 = np.dtype("<i8"), np.dtype("<i4"), np.dtype("<f4")


@dataclass(eq=False)
class FramedSubgraph:
    """A message buffer laid out for a subgraph of known sizes, its six arrays still to be written.

    ``arrays`` are the writable views where the arrays' bytes go inside the
    message (field order: node_ids, indptr, indices, edge_weights,
    edge_weights_t, loss_weights); write them, then :func:`seal_subgraph`.
    """

    buffer: np.ndarray
    arrays: tuple[np.ndarray, ...]
    job: np.ndarray
    scalars: tuple
    arena: np.ndarray
    cuts: np.ndarray
    meta: tuple[str, int, int, int]


class MessageFramer:
    """Lays out the messages of one producer (a job id and a worker), reusing its scratch buffers.

    The counterpart of :func:`encode_subgraph_into` for a producer that writes
    the arrays itself (``Sampler.sample_into``): their bytes are written once,
    where the message holds them, instead of being copied there afterwards.
    A :class:`FramedSubgraph` it returns stays valid until its next ``frame``.

    Raises:
        InvalidArgument: a job id or worker out of range (as ``encode_subgraph``).
    """

    def __init__(self, job_id: str = "", worker: int = 0) -> None:
        if not DIRECT_AVAILABLE:
            raise InvalidArgument("MessageFramer needs the compiled codec (saintpipe.services.pool.fused)")
        job, self._meta = _meta(job_id, worker, 0, 0)
        self._job = np.frombuffer(job, dtype=np.uint8)
        self._worker = np.uint64(wire.unsigned(self._meta[1]))
        self._arena = np.empty(fused.ARENA + len(job), dtype=np.uint8)
        self._cuts = np.empty(8, dtype=np.int64)
        self._offsets = np.empty(6, dtype=np.int64)

    def frame(self, allocate: Callable[[int], np.ndarray], num_nodes: int, num_edges: int, *,
              sequence: int = 0, seed: int = 0) -> FramedSubgraph:
        """Lay out the message of a subgraph with these sizes and ids in ``allocate(size)``'s buffer.

        ``allocate`` is called once, as for ``encode_subgraph_into``.

        Raises:
            InvalidArgument: ids out of range, or an unfit buffer.
        """
        if not (type(sequence) is int and _INT64[0] <= sequence <= _INT64[1]
                and type(seed) is int and 0 <= seed <= _UINT64[1]):
            _meta(self._meta[0], self._meta[1], sequence, seed)  # raises, naming the field (or converts)
        scalars = (self._worker, np.uint64(wire.unsigned(int(sequence))), np.uint64(seed))
        size = int(fused.layout_graph(self._job, *scalars, num_nodes, num_edges, self._arena, self._cuts,
                                      self._offsets))
        dest = _destination(allocate(size), size)
        o = self._offsets.tolist()
        n, e = num_nodes, num_edges
        views = (dest[o[0] : o[0] + 8 * n].view(_I8), dest[o[1] : o[1] + 8 * n + 8].view(_I8),
                 dest[o[2] : o[2] + 4 * e].view(_I4), dest[o[3] : o[3] + 4 * e].view(_F4),
                 dest[o[4] : o[4] + 4 * e].view(_F4), dest[o[5] : o[5] + 4 * n].view(_F4))
        meta = (self._meta[0], self._meta[1], int(sequence), int(seed))
        return FramedSubgraph(dest, views, self._job, scalars, self._arena, self._cuts, meta)


def frame_subgraph(
    allocate: Callable[[int], np.ndarray], num_nodes: int, num_edges: int, *, job_id: str = "",
    worker: int = 0, sequence: int = 0, seed: int = 0,
) -> FramedSubgraph:
    """:meth:`MessageFramer.frame` once: lay out a message for arrays to be written in place, then
    :func:`seal_subgraph` it."""
    return MessageFramer(job_id, worker).frame(allocate, num_nodes, num_edges, sequence=sequence, seed=seed)


def seal_subgraph(framed: FramedSubgraph, *, validate: bool = True) -> int:
    """Finish a message whose arrays were written in place: its small pieces and its checksum.

    One pass hashes (and with ``validate`` checks) the arrays where they lie;
    the bytes are then exactly ``encode_subgraph`` of the subgraph they hold.

    Returns:
        nbytes, the message's length at the start of the buffer.

    Raises:
        InvalidArgument: a check failed (as ``encode_subgraph``); the buffer holds garbage.
    """
    views = tuple(_read_only(a) for a in framed.arrays)
    status = fused.fill(framed.job, *framed.scalars, *views, bool(validate), framed.arena, framed.cuts,
                        framed.buffer, fused.COPY_PIECES)
    if status == fused.INVALID:
        _refuse(dict(zip(ARRAYS, framed.arrays)))
    if status == fused.OK:
        return framed.buffer.size - 9 + int(framed.cuts[7] - framed.cuts[6])  # no field for a zero checksum
    # No hash state (FALLBACK): the Python path, through a copy (the parts point into the buffer itself).
    job_id, worker, sequence, seed = framed.meta
    sg = Subgraph(*framed.arrays, job_id=job_id, worker=worker, sequence=sequence, seed=seed)
    data = encode_subgraph(sg, validate=validate)
    framed.buffer[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return len(data)


def _destination(buf: object, size: int) -> np.ndarray:
    """The first ``size`` bytes of ``allocate``'s buffer as a flat uint8 array; InvalidArgument if unfit."""
    if not isinstance(buf, np.ndarray):
        raise InvalidArgument(f"encode buffer: expected a numpy uint8 array, got {type(buf).__name__}")
    if buf.dtype != np.uint8:
        raise InvalidArgument(f"encode buffer: dtype {buf.dtype}, expected uint8")
    if not buf.flags.writeable:
        raise InvalidArgument("encode buffer: read-only")
    if not buf.flags.c_contiguous:
        raise InvalidArgument("encode buffer: not C-contiguous")
    if buf.size < size:
        raise InvalidArgument(f"encode buffer: {buf.size} bytes, the message needs {size}")
    return buf.reshape(-1)[:size]


def _encode_fused(job: bytes, meta: tuple, arrays: dict[str, np.ndarray], validate: bool) -> list | None:
    """``encode_subgraph_parts`` through ``fused.encode``; None when it could not run (then the Python path)."""
    arena = np.empty(fused.ARENA + len(job), dtype=np.uint8)
    cuts = np.empty(8, dtype=np.int64)
    status = fused.encode(
        np.frombuffer(job, dtype=np.uint8),
        np.uint64(wire.unsigned(meta[1])),
        np.uint64(wire.unsigned(meta[2])),
        np.uint64(meta[3]),
        *(_read_only(a) for a in arrays.values()),
        bool(validate),
        arena,
        cuts,
    )
    if status == fused.INVALID:
        _refuse(arrays)
    if status != fused.OK:
        return None
    c = cuts.tolist()
    small = memoryview(arena)
    parts: list = []
    for i, arr in enumerate(arrays.values()):
        parts.append(small[c[i] : c[i + 1]])
        if arr.nbytes:
            parts.append(memoryview(arr).cast("B"))
    if c[7] > c[6]:
        parts.append(small[c[6] : c[7]])
    return parts


def _refuse(arrays: dict[str, np.ndarray]) -> NoReturn:
    """Raise InvalidArgument naming what the compiled checks refused (the Python checks locate it)."""
    try:
        check_subgraph_arrays(arrays)
    except DecodeError as exc:
        raise InvalidArgument(f"cannot encode: {exc}") from None
    raise InvalidArgument("cannot encode: the subgraph failed a structural check")  # not expected


def _read_only(arr: np.ndarray) -> np.ndarray:
    """A read-only view: kernels see one array type whether callers' arrays are writable or not
    (each combination would be compiled anew)."""
    if not arr.flags.writeable:
        return arr
    view = arr.view()
    view.flags.writeable = False
    return view


def _array_header(number: int, arr: np.ndarray, pos: int) -> bytes:
    """The bytes of Subgraph field ``number`` up to the data of ``arr``, starting at message offset ``pos``.

    Picks the padding field's size so that the array's bytes start at a multiple
    of ALIGN from the message start.
    """
    nbytes = arr.nbytes
    shape = wire.varint(arr.size)
    header = _ARRAY_PREFIX[number] + wire.varint(len(shape)) + shape
    outer_key = _FIELD_KEYS[number]
    if nbytes == 0:  # proto3 omits an empty bytes field; nothing to align
        return outer_key + wire.varint(len(header)) + header
    data_key = _DATA_KEY + wire.varint(nbytes)
    fixed = len(header) + len(data_key)
    before = pos + len(outer_key) + fixed  # bytes before the data, less the length varint and the padding
    # A padding field of p zero bytes takes 2 + p bytes on the wire (absent when p = 0).
    pad = -(before + wire.varint_size(fixed + nbytes)) % ALIGN
    if pad in (1, 2):
        pad += ALIGN
    if (before + wire.varint_size(fixed + pad + nbytes) + pad) % ALIGN:  # padding lengthened the varint
        for pad in _PAD_SIZES:
            if (before + wire.varint_size(fixed + pad + nbytes) + pad) % ALIGN == 0:
                break
    return b"".join((outer_key, wire.varint(fixed + pad + nbytes), header, _PADDINGS[pad], data_key))


_FIELD_KEYS = {number: wire.tag(number, wire.LEN) for number, _ in ARRAYS.values()}
_DTYPE_KEY, _SHAPE_KEY, _DATA_KEY = wire.tag(1, wire.LEN), wire.tag(2, wire.LEN), wire.tag(4, wire.LEN)
# Per array field: the dtype field and the shape field's key (all but the shape's length and value).
_ARRAY_PREFIX = {
    number: _DTYPE_KEY + wire.varint(len(dtype.str)) + dtype.str.encode() + _SHAPE_KEY
    for number, dtype in ARRAYS.values()
}
_VERSION_FIELD = wire.tag(1, wire.VARINT) + wire.varint(FORMAT_VERSION)
_JOB_KEY = wire.tag(2, wire.LEN)
_WORKER_KEY, _SEQUENCE_KEY, _SEED_KEY = (wire.tag(n, wire.VARINT) for n in (3, 4, 5))
_CHECKSUM_KEY = wire.tag(12, wire.I64)
# Up to two alignments of sizes: where the padding lengthens the field's length varint (a length near
# 128, 16384, ...), the residues that one alignment's worth of sizes reaches skip the one that aligns.
_PAD_SIZES = (0, *range(3, 3 + 2 * ALIGN))
_PADDINGS = {p: (wire.tag(3, wire.LEN) + wire.varint(p - 2) + bytes(p - 2)) if p else b"" for p in _PAD_SIZES}


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
            meta, arrays = _fields_from_table(buf, table)
            return Subgraph(job_id=meta[0], worker=meta[1], sequence=meta[2], seed=meta[3], **arrays)
        framed = status != fused.INVALID
    else:
        framed = scan.scan(raw, table)
    if framed:  # well framed: the compiled walk found every field
        meta, arrays = _fields_from_table(buf, table)
    else:  # the Python walk names what is wrong (or decodes what the compiled walk does not handle)
        meta, arrays = _fields(buf)
    expected = _checksum(FORMAT_VERSION, meta, arrays)
    if meta[4] != expected:
        raise DecodeError(
            f"subgraph checksum: message says {meta[4]:#018x}, its contents hash to "
            f"{expected:#018x} (the message was corrupted)"
        )
    check_subgraph_arrays(arrays)
    return Subgraph(job_id=meta[0], worker=meta[1], sequence=meta[2], seed=meta[3], **arrays)


_U64_MASK = (1 << 64) - 1


def _fields_from_table(buf: bytes | bytearray | memoryview, table: np.ndarray) -> tuple[tuple, dict]:
    """The metadata (job, worker, sequence, seed, checksum) and array views located by ``scan``."""
    t = table.tolist()
    job_id = _job_id(buf, t[scan.T_JOB_AT], t[scan.T_JOB_LEN])
    meta = (
        job_id,
        wire.signed(t[scan.T_WORKER] & _U64_MASK),
        wire.signed(t[scan.T_SEQUENCE] & _U64_MASK),
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


def _fields(buf: bytes | bytearray | memoryview) -> tuple[tuple, dict]:
    """The same as ``_fields_from_table`` by a Python walk of the message, raising on anything wrong."""
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
    job_id = _job_id(buf, *scalars["job_id"]) if "job_id" in scalars else ""
    meta = (
        job_id,
        wire.signed(scalars.get("worker", 0)),
        wire.signed(scalars.get("sequence", 0)),
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


def _wire_array(name: str, value: object) -> np.ndarray:
    """The array as it goes on the wire: 1-D, C-contiguous, explicit little-endian wire dtype."""
    target = ARRAYS[name][1]
    if type(value) is np.ndarray and value.dtype == target and value.ndim == 1 and value.flags.c_contiguous:
        return value  # already as it goes on the wire (what the samplers produce)
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
    for name, dtype_key in _HASH_DTYPES.items():
        arr = arrays[name]
        h.update(dtype_key + arr.size.to_bytes(8, "little"))
        h.update(arr)
    return h.intdigest()


# struct "<4s" of each wire dtype string (the arrays hashed always have their wire dtype).
_HASH_DTYPES = {name: dtype.str.encode().ljust(4, b"\0") for name, (_, dtype) in ARRAYS.items()}
