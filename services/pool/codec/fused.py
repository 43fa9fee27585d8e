"""The codec's hot paths as single compiled passes: frame+hash+check on encode, walk+hash+check on decode.

Each array is hashed (XXH3-64, through :mod:`saintpipe.services.pool.codec.xxh3`) and checked
(:mod:`saintpipe.services.pool.codec.validate`) one after the other, while it is in cache, in
one kernel call, instead of a Python loop of hash updates followed by a second
pass for the checks. The encoder's kernel also writes every small piece of the
message (scalars, array headers with their padding, checksum) into one buffer
that the codec cuts between the arrays, which are sent in place.

Both kernels only answer "done" or "not done": on anything wrong they return a
status and the codec's Python path, which stays the reference, names the field
at fault (tests compare the two paths byte for byte and on fuzzed messages).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from saintpipe.services.pool.codec import xxh3
from saintpipe.services.pool.codec.scan import _DTYPES, _ITEMSIZES, T_ARRAYS, T_CHECKSUM, T_JOB_AT, T_JOB_LEN, scan
from saintpipe.services.pool.codec.validate import finite, ids_ok, indices_ok, indptr_ok

AVAILABLE = xxh3.AVAILABLE
OK, INVALID, FALLBACK = 0, 1, 2
# Bytes of the encoder's buffer beyond the job id: scalars, six array headers, the checksum field.
ARENA = 400
_VERSION = 1
_PADS = np.array([0, *range(3, 19)], dtype=np.int64)  # codec._PAD_SIZES


@njit(cache=True, nogil=True)
def _varint_size(value):  # pragma: no cover - compiled
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


@njit(cache=True, nogil=True)
def _put_varint(out, pos, value):  # pragma: no cover - compiled
    value = np.uint64(value)
    while value >= 0x80:
        out[pos] = np.uint8((value & np.uint64(0x7F)) | np.uint64(0x80))
        value >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(value)
    return pos + 1


@njit(cache=True, nogil=True)
def _put_u64(out, pos, value):  # pragma: no cover - compiled
    value = np.uint64(value)
    for i in range(8):
        out[pos + i] = np.uint8((value >> np.uint64(8 * i)) & np.uint64(0xFF))
    return pos + 8


@njit(cache=True, nogil=True)
def _hash_head(state, scratch, job_ptr, job_len, worker, sequence, seed):  # pragma: no cover - compiled
    """struct "<IQqqQ" (version, job length, worker, sequence, seed), then the job id."""
    version = np.uint64(_VERSION)
    for i in range(4):
        scratch[i] = np.uint8((version >> np.uint64(8 * i)) & np.uint64(0xFF))
    _put_u64(scratch, 4, job_len)
    _put_u64(scratch, 12, worker)
    _put_u64(scratch, 20, sequence)
    _put_u64(scratch, 28, seed)
    xxh3.update(state, scratch.ctypes.data, 36)
    if job_len:
        xxh3.update(state, job_ptr, job_len)


@njit(cache=True, nogil=True)
def _hash_array(state, scratch, index, count, data):  # pragma: no cover - compiled
    """struct "<4sQ" (wire dtype, element count), then the array's bytes (``data``, as uint8)."""
    for i in range(3):
        scratch[i] = _DTYPES[index, i]
    scratch[3] = 0
    _put_u64(scratch, 4, count)
    xxh3.update(state, scratch.ctypes.data, 12)
    if data.size:
        xxh3.update(state, data.ctypes.data, data.size)


@njit(cache=True, nogil=True)
def _header(out, pos, msg_pos, index, count, nbytes):  # pragma: no cover - compiled
    """Write array field ``index``'s bytes up to its data, which must start 8-aligned in the message.

    ``pos`` is where to write in ``out``, ``msg_pos`` where that is in the message.
    The same bytes as ``codec._array_header``.
    """
    count_size = _varint_size(count)
    header = 5 + 1 + _varint_size(count_size) + count_size  # dtype field, shape field
    out[pos] = np.uint8(((6 + index) << 3) | 2)
    pos += 1
    pad = 0
    if nbytes == 0:
        pos = _put_varint(out, pos, header)
    else:
        fixed = header + 1 + _varint_size(nbytes)
        before = msg_pos + 1 + fixed
        # codec._array_header's choice, byte for byte: the padding that aligns the data if the length
        # varint keeps its size (a padding field of p zero bytes takes 2 + p bytes, so 1 and 2 become
        # 9 and 10); only when the padding lengthens the varint, the smallest padding that works.
        pad = (8 - (before + _varint_size(fixed + nbytes)) % 8) % 8
        if pad == 1 or pad == 2:
            pad += 8
        if (before + _varint_size(fixed + pad + nbytes) + pad) % 8 != 0:
            for p in _PADS:
                if (before + _varint_size(fixed + p + nbytes) + p) % 8 == 0:
                    pad = p
                    break
        pos = _put_varint(out, pos, fixed + pad + nbytes)
    out[pos] = 0x0A  # dtype
    out[pos + 1] = 3
    for i in range(3):
        out[pos + 2 + i] = _DTYPES[index, i]
    pos += 5
    out[pos] = 0x12  # shape, packed
    pos = _put_varint(out, pos + 1, count_size)
    pos = _put_varint(out, pos, count)
    if nbytes:
        if pad:
            out[pos] = 0x1A
            out[pos + 1] = np.uint8(pad - 2)
            for i in range(pad - 2):
                out[pos + 2 + i] = 0
            pos += pad
        out[pos] = 0x22  # data
        pos = _put_varint(out, pos + 1, nbytes)
    return pos


@njit(cache=True, nogil=True)
def layout_graph(job, worker, sequence, seed, num_nodes, num_edges, arena, cuts, offsets):  # pragma: no cover
    """:func:`layout` for a subgraph of ``num_nodes`` nodes and ``num_edges`` entries.

    Also sets ``offsets[i]``, where array ``i``'s bytes start in the message
    (the message is piece 0, array 0, piece 1, ..., array 5, checksum).
    """
    sizes = np.empty(6, dtype=np.int64)
    sizes[0], sizes[1], sizes[2] = num_nodes, num_nodes + 1, num_edges
    sizes[3], sizes[4], sizes[5] = num_edges, num_edges, num_nodes
    size = layout(job, worker, sequence, seed, sizes, arena, cuts)
    at = 0
    for index in range(6):
        at += cuts[index + 1] - cuts[index]
        offsets[index] = at
        at += sizes[index] * _ITEMSIZES[index]
    return size


@njit(cache=True, nogil=True)
def layout(job, worker, sequence, seed, sizes, arena, cuts):  # pragma: no cover
    """Frame a subgraph's message without reading its arrays' contents: scalars and array headers.

    Writes the message's small pieces but the checksum into ``arena`` (``sizes``: the six arrays' lengths): the
    message is ``arena[cuts[0]:cuts[1]]``, array 0, ``arena[cuts[1]:cuts[2]]``,
    array 1, ..., array 5, then the checksum field (``fill`` sets ``cuts[7]``).
    ``worker``, ``sequence`` and ``seed`` come as the bits of their uint64
    varints. Returns the message's length with a checksum field (9 bytes,
    absent only when the digest is 0).
    """
    # Scalars, proto3 style: fields equal to their default are omitted.
    arena[0] = 0x08
    arena[1] = _VERSION
    pos = 2
    if job.size:
        arena[pos] = 0x12
        pos = _put_varint(arena, pos + 1, job.size)
        for k in range(job.size):  # a loop, not a slice assignment: see services/sampler/kernels/induce.py
            arena[pos + k] = job[k]
        pos += job.size
    for key, value in ((0x18, worker), (0x20, sequence), (0x28, seed)):
        if value:
            arena[pos] = key
            pos = _put_varint(arena, pos + 1, value)
    msg_pos = pos
    cuts[0] = 0
    for index in range(6):  # each array's header, cut from the next piece before its data
        nbytes = sizes[index] * _ITEMSIZES[index]
        cuts[index + 1] = _header(arena, pos, msg_pos, index, sizes[index], nbytes)
        msg_pos += cuts[index + 1] - pos + nbytes
        pos = cuts[index + 1]
    return msg_pos + 9


@intrinsic
def _copy(typingctx, dst, dst_at, src, src_at, count):  # pragma: no cover - compiled
    """``memcpy`` of ``count`` bytes from ``src[src_at:]`` to ``dst[dst_at:]`` (uint8 arrays, unchecked).

    Numba's slice assignment copies a byte at a time (several times slower).
    """
    if not all(isinstance(a, types.Array) and a.dtype == types.uint8 for a in (dst, src)):
        return None
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        to = context.make_array(signature.args[0])(context, builder, args[0])
        frm = context.make_array(signature.args[2])(context, builder, args[2])
        cgutils.raw_memcpy(builder, builder.gep(to.data, [args[1]]), builder.gep(frm.data, [args[3]]), args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


# fill's ``copy`` modes: leave ``dest`` alone; write the whole message; write only the small pieces
# around arrays that already lie in place in ``dest`` (written there by the sampler).
NO_COPY, COPY_ALL, COPY_PIECES = 0, 1, 2


@njit(cache=True, nogil=True)
def _emit(dest, at, arena, cuts, index, data, copy):  # pragma: no cover - compiled
    """Write the small piece before array ``index`` at ``dest[at:]``, then (COPY_ALL) the array's bytes."""
    if copy == NO_COPY:
        return at
    piece = cuts[index + 1] - cuts[index]
    _copy(dest, at, arena, cuts[index], piece)
    if copy == COPY_ALL:
        _copy(dest, at + piece, data, 0, data.size)
    return at + piece + data.size


@njit(cache=True, nogil=True)
def fill(
    job, worker, sequence, seed, a0, a1, a2, a3, a4, a5, validate, arena, cuts, dest, copy
):  # pragma: no cover - compiled
    """Hash and (with ``validate``) check each array of a message framed by ``layout``; finish the message.

    Each array is hashed, checked and, with ``copy``, written with the piece
    before it into ``dest`` while it is in cache. Then the checksum field goes
    into ``arena`` (``cuts[7]`` set) and, with ``copy``, at the end of ``dest``,
    which must hold ``layout``'s length. The arrays should be read-only views
    (one compiled specialization for all callers). Returns OK, INVALID (a check
    failed; ``dest`` then holds garbage) or FALLBACK (no hash state could be
    allocated).
    """
    n = a0.size
    e = a2.size
    if validate and (a1.size != n + 1 or a3.size != e or a4.size != e or a5.size != n):
        return INVALID
    data = a0.nbytes + a1.nbytes + a2.nbytes + a3.nbytes + a4.nbytes + a5.nbytes
    if copy != NO_COPY and dest.size < cuts[6] + 9 + data:  # not framed by ``layout`` for these arrays
        return FALLBACK
    state = xxh3.create_state()
    if state == 0:
        return FALLBACK
    xxh3.reset(state)
    scratch = np.empty(36, dtype=np.uint8)
    _hash_head(state, scratch, job.ctypes.data, job.size, worker, sequence, seed)
    # Each array hashed, then checked and copied while in cache.
    _hash_array(state, scratch, 0, a0.size, a0.view(np.uint8))
    ok = ids_ok(a0) if validate else True
    at = _emit(dest, 0, arena, cuts, 0, a0.view(np.uint8), copy)
    _hash_array(state, scratch, 1, a1.size, a1.view(np.uint8))
    ok = ok and (indptr_ok(a1, e) if validate else True)
    at = _emit(dest, at, arena, cuts, 1, a1.view(np.uint8), copy)
    _hash_array(state, scratch, 2, a2.size, a2.view(np.uint8))
    ok = ok and (indices_ok(a2, a1) if validate else True)
    at = _emit(dest, at, arena, cuts, 2, a2.view(np.uint8), copy)
    for k, weights in enumerate((a3, a4, a5)):  # the three float32 arrays, fields 3 to 5
        _hash_array(state, scratch, 3 + k, weights.size, weights.view(np.uint8))
        ok = ok and (finite(weights.view(np.uint32)) if validate else True)
        at = _emit(dest, at, arena, cuts, 3 + k, weights.view(np.uint8), copy)
    checksum = xxh3.digest(state)
    xxh3.free_state(state)
    if not ok:
        return INVALID
    pos = cuts[6]
    if checksum:
        arena[pos] = 0x61  # field 12, fixed64
        pos = _put_u64(arena, pos + 1, checksum)
    cuts[7] = pos
    if copy != NO_COPY:
        _copy(dest, at, arena, cuts[6], pos - cuts[6])
    return OK


@njit(cache=True, nogil=True)
def encode(job, worker, sequence, seed, a0, a1, a2, a3, a4, a5, validate, arena, cuts):  # pragma: no cover
    """Frame, hash and (with ``validate``) check a subgraph's wire arrays: ``layout`` then ``fill``.

    Leaves the message's small pieces in ``arena``, cut by ``cuts`` (see
    ``layout``: the message is ``arena[cuts[0]:cuts[1]]``, array 0, ...,
    array 5, ``arena[cuts[6]:cuts[7]]``) for the caller to send with the arrays
    in place. Returns ``fill``'s status.
    """
    sizes = np.empty(6, dtype=np.int64)
    sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5] = a0.size, a1.size, a2.size, a3.size, a4.size, a5.size
    layout(job, worker, sequence, seed, sizes, arena, cuts)
    return fill(job, worker, sequence, seed, a0, a1, a2, a3, a4, a5, validate, arena, cuts, arena[:0], NO_COPY)


@njit(cache=True, nogil=True)
def _bytes_of(buf, table, index):  # pragma: no cover - compiled
    """The data bytes of array field ``index`` of a message located by ``scan``."""
    at = T_ARRAYS + 3 * index + 1
    return buf[table[at] : table[at] + table[at + 1]]


@njit(cache=True, nogil=True)
def check_message(buf, table):  # pragma: no cover - compiled
    """Walk (``scan``), hash and check a whole message; OK only when it decodes to a valid subgraph.

    Anything else (INVALID: framing; FALLBACK: checksum, checks, alignment)
    leaves the verdict and its message to the codec's Python path.
    """
    if not scan(buf, table):
        return INVALID
    base = buf.ctypes.data
    for index in range(6):
        at = T_ARRAYS + 3 * index
        if table[at + 2] and (base + table[at + 1]) % _ITEMSIZES[index]:
            return FALLBACK  # not laid out by this encoder: the codec copies such arrays
    state = xxh3.create_state()
    if state == 0:
        return FALLBACK
    xxh3.reset(state)
    scratch = np.empty(36, dtype=np.uint8)
    _hash_head(state, scratch, base + table[T_JOB_AT], table[T_JOB_LEN], table[3], table[4], table[5])
    node_ids = _bytes_of(buf, table, 0).view(np.int64)
    indptr = _bytes_of(buf, table, 1).view(np.int64)
    indices = _bytes_of(buf, table, 2).view(np.int32)
    n = node_ids.size
    e = indices.size
    ok = (
        indptr.size == n + 1
        and table[T_ARRAYS + 3 * 3] == e
        and table[T_ARRAYS + 3 * 4] == e
        and table[T_ARRAYS + 3 * 5] == n
    )
    _hash_array(state, scratch, 0, node_ids.size, _bytes_of(buf, table, 0))
    ok = ok and ids_ok(node_ids)
    _hash_array(state, scratch, 1, indptr.size, _bytes_of(buf, table, 1))
    ok = ok and indptr_ok(indptr, e)
    _hash_array(state, scratch, 2, indices.size, _bytes_of(buf, table, 2))
    ok = ok and indices_ok(indices, indptr)
    for index in range(3, 6):
        data = _bytes_of(buf, table, index)
        _hash_array(state, scratch, index, data.size // 4, data)
        ok = ok and finite(data.view(np.uint32))
    checksum = xxh3.digest(state)
    xxh3.free_state(state)
    if not ok or checksum != np.uint64(table[T_CHECKSUM]):
        return FALLBACK
    return OK
