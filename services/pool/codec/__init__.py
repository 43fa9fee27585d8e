"""Subgraph <-> bytes: the ``saintpipe.protos.Subgraph`` message (protos/saintpipe/protos/subgraph.proto).

Arrays travel as raw little-endian bytes with a dtype and a shape. Encoding
copies each array once (into the message), or not at all when the pieces are
sent in place; decoding (:mod:`saintpipe.services.pool.codec.decoder`, re-exported
here: ``decode_subgraph``, ``decode_owned``) copies nothing: the arrays it
returns are read-only numpy views of the message's own bytes, aligned because
the encoder pads each ``data`` field to a multiple of 8 bytes from the message
start. Copy an array before writing to it.

The bytes are exactly what the generated ``subgraph_pb2.Subgraph`` serializes
(field order, defaults omitted), and any protobuf reader can parse them; the
framing is done by hand (:mod:`saintpipe.core.protowire`, whose docstring has
the figures) only to avoid the generated classes' copies.

The decoder trusts nothing: every malformation raises
:class:`~saintpipe.core.errors.DecodeError` naming the field at fault. The XXH3-64
checksum (:func:`saintpipe.services.pool.codec.schema.checksum`) covers every field but
the padding, so a corrupted message is rejected rather than decoded into a
subgraph other than the one encoded.

The codec's modules: this one (the encoders), ``decoder``, ``compact`` (node sets,
format version 2), ``schema`` (version, field numbers, wire dtypes, checksum),
``scan`` and ``fused`` (the compiled paths), ``xxh3`` (the hash, callable from
Numba) and ``validate`` (the arrays' invariants).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
from saintpipe.services.pool.codec import fused
from saintpipe.services.pool.codec.decoder import decode_owned, decode_subgraph
from saintpipe.services.pool.codec.schema import ALIGN, ARRAYS, FORMAT_VERSION, INT64, UINT64, checked_meta, checksum
from saintpipe.services.pool.codec.validate import check_subgraph_arrays

from saintpipe.core import protowire as pw
from saintpipe.core.errors import DecodeError, InvalidArgument
from saintpipe.core.subgraph import Subgraph

__all__ = [
    "ALIGN", "ARRAYS", "DIRECT_AVAILABLE", "FORMAT_VERSION", "FramedSubgraph", "MessageFramer", "decode_owned",
    "decode_subgraph", "encode_subgraph", "encode_subgraph_into", "encode_subgraph_parts", "frame_subgraph",
    "seal_subgraph",
]


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
        fused_parts = _encode_fused(job, meta, arrays, validate)
        if fused_parts is not None:
            return fused_parts
    if validate:
        _check(arrays)
    # Scalars first (field order), proto3 style: fields equal to their default are omitted.
    head = bytearray(_VERSION_FIELD)
    if job:
        head += _JOB_KEY + pw.varint(len(job)) + job
    for key, value in ((_WORKER_KEY, meta[1]), (_SEQUENCE_KEY, meta[2]), (_SEED_KEY, meta[3])):
        if value:
            head += key + pw.varint(pw.unsigned(value))
    pos = len(head)
    parts: list = [bytes(head)]
    for name, (number, _) in ARRAYS.items():
        arr = arrays[name]
        header = _array_header(number, arr, pos)
        parts.append(header)
        pos += len(header)
        if arr.nbytes:
            parts.append(arr.data.cast("B"))
            pos += arr.nbytes
    digest = checksum(FORMAT_VERSION, meta, arrays)
    if digest:
        parts.append(_CHECKSUM_KEY + struct.pack("<Q", digest))
    return parts


def _prepare(sg: Subgraph) -> tuple[bytes, tuple[str, int, int, int], dict[str, np.ndarray]]:
    """The job id's UTF-8 bytes, the metadata and the wire arrays of ``sg``; InvalidArgument if unfit."""
    arrays = {name: _wire_array(name, getattr(sg, name)) for name in ARRAYS}
    job, meta = _meta(sg.job_id, sg.worker, sg.sequence, sg.seed)
    return job, meta, arrays


def _meta(job_id: object, worker: object, sequence: object, seed: object) -> tuple[bytes, tuple[str, int, int, int]]:
    """The job id's UTF-8 bytes and the checked metadata; InvalidArgument if unfit."""
    meta = checked_meta(job_id, worker, sequence, seed)
    try:
        return meta[0].encode("utf-8"), meta
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"subgraph job_id: not encodable as UTF-8 ({exc})") from None


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
    into the buffer still cost what they cost (docs/benchmarks/pool.md has figures).

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
        head, arena, cuts = _kernel_head(job, meta)
        views = [_read_only(a) for a in arrays.values()]
        sizes = np.array([v.size for v in views], dtype=np.int64)  # no array contents read yet
        size = int(fused.layout(*head, sizes, arena, cuts))  # type: ignore[call-arg]  # mypy: starred tuple
        dest = _destination(allocate(size), size)
        status = fused.fill(*head, *views, bool(validate), arena, cuts, dest, fused.COPY_ALL)  # type: ignore[call-arg]
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
            raise InvalidArgument("MessageFramer needs the compiled codec (saintpipe.services.pool.codec.fused)")
        job, self._meta = _meta(job_id, worker, 0, 0)
        self._job = np.frombuffer(job, dtype=np.uint8)
        self._worker = np.uint64(pw.unsigned(self._meta[1]))
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
        if not (type(sequence) is int and INT64[0] <= sequence <= INT64[1]
                and type(seed) is int and 0 <= seed <= UINT64[1]):
            _meta(self._meta[0], self._meta[1], sequence, seed)  # raises, naming the field (or converts)
        scalars = (self._worker, np.uint64(pw.unsigned(int(sequence))), np.uint64(seed))
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
    status = fused.fill(framed.job, *framed.scalars, *views, bool(validate), framed.arena,  # type: ignore[call-arg]  # mypy: a starred list takes every later parameter
                        framed.cuts, framed.buffer, fused.COPY_PIECES)
    if status == fused.INVALID:
        _refuse(dict(zip(ARRAYS, framed.arrays)))
    if status == fused.OK:
        return framed.buffer.size - 9 + int(framed.cuts[7] - framed.cuts[6])  # no field for a zero checksum
    # No hash state (FALLBACK): the Python path, through a copy (the parts point into the buffer itself).
    job_id, worker, sequence, seed = framed.meta
    # mypy: a starred tuple of unknown length may reach the keyword parameters too.
    sg = Subgraph(*framed.arrays, job_id=job_id, worker=worker,  # type: ignore[misc, arg-type]
                  sequence=sequence, seed=seed)
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
    head, arena, cuts = _kernel_head(job, meta)
    status = fused.encode(  # type: ignore[call-arg]  # mypy: a starred list takes every later parameter
        *head, *(_read_only(a) for a in arrays.values()), bool(validate), arena, cuts
    )
    if status == fused.INVALID:
        _refuse(arrays)
    if status != fused.OK:
        return None
    c = cuts.tolist()
    small = arena.data
    parts: list = []
    for i, arr in enumerate(arrays.values()):
        parts.append(small[c[i] : c[i + 1]])
        if arr.nbytes:
            parts.append(arr.data.cast("B"))
    if c[7] > c[6]:
        parts.append(small[c[6] : c[7]])
    return parts


def _kernel_head(job: bytes, meta: tuple) -> tuple[tuple, np.ndarray, np.ndarray]:
    """The compiled kernels' first arguments (the job id's bytes, then worker, sequence and seed as the bits of
    their uint64 varints) and fresh scratch for them: the arena and its cuts."""
    head = (np.frombuffer(job, dtype=np.uint8), np.uint64(pw.unsigned(meta[1])), np.uint64(pw.unsigned(meta[2])),
            np.uint64(meta[3]))
    return head, np.empty(fused.ARENA + len(job), dtype=np.uint8), np.empty(8, dtype=np.int64)


def _check(arrays: dict[str, np.ndarray]) -> None:
    """The decoder's structural checks, failing as an encoder does: InvalidArgument naming the field."""
    try:
        check_subgraph_arrays(arrays)
    except DecodeError as exc:
        raise InvalidArgument(f"cannot encode: {exc}") from None


def _refuse(arrays: dict[str, np.ndarray]) -> NoReturn:
    """Raise InvalidArgument naming what the compiled checks refused (the Python checks locate it)."""
    _check(arrays)
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
    shape = pw.varint(arr.size)
    header = _ARRAY_PREFIX[number] + pw.varint(len(shape)) + shape
    outer_key = _FIELD_KEYS[number]
    if nbytes == 0:  # proto3 omits an empty bytes field; nothing to align
        return outer_key + pw.varint(len(header)) + header
    data_key = _DATA_KEY + pw.varint(nbytes)
    fixed = len(header) + len(data_key)
    before = pos + len(outer_key) + fixed  # bytes before the data, less the length varint and the padding
    # A padding field of p zero bytes takes 2 + p bytes on the wire (absent when p = 0).
    pad = -(before + pw.varint_size(fixed + nbytes)) % ALIGN
    if pad in (1, 2):
        pad += ALIGN
    if (before + pw.varint_size(fixed + pad + nbytes) + pad) % ALIGN:  # padding lengthened the varint
        for pad in _PAD_SIZES:
            if (before + pw.varint_size(fixed + pad + nbytes) + pad) % ALIGN == 0:
                break
    return b"".join((outer_key, pw.varint(fixed + pad + nbytes), header, _PADDINGS[pad], data_key))


_FIELD_KEYS = {number: pw.tag(number, pw.LEN) for number, _ in ARRAYS.values()}
_DTYPE_KEY, _SHAPE_KEY, _DATA_KEY = pw.tag(1, pw.LEN), pw.tag(2, pw.LEN), pw.tag(4, pw.LEN)
# Per array field: the dtype field and the shape field's key (all but the shape's length and value).
_ARRAY_PREFIX = {
    number: _DTYPE_KEY + pw.varint(len(dtype.str)) + dtype.str.encode() + _SHAPE_KEY
    for number, dtype in ARRAYS.values()
}
_VERSION_FIELD = pw.tag(1, pw.VARINT) + pw.varint(FORMAT_VERSION)
_JOB_KEY = pw.tag(2, pw.LEN)
_WORKER_KEY, _SEQUENCE_KEY, _SEED_KEY = (pw.tag(n, pw.VARINT) for n in (3, 4, 5))
_CHECKSUM_KEY = pw.tag(12, pw.I64)
# Up to two alignments of sizes: where the padding lengthens the field's length varint (a length near
# 128, 16384, ...), the residues that one alignment's worth of sizes reaches skip the one that aligns.
_PAD_SIZES = (0, *range(3, 3 + 2 * ALIGN))
_PADDINGS = {p: (pw.tag(3, pw.LEN) + pw.varint(p - 2) + bytes(p - 2)) if p else b"" for p in _PAD_SIZES}


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
