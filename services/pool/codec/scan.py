"""A compiled walk of a ``Subgraph`` message: the decoder's fast path.

The compiled counterpart, for ``Subgraph`` messages only, of the shared
hand-written reader :mod:`saintpipe.core.protowire`: the Python walk over it
(:func:`saintpipe.services.pool.codec.decoder.fields`) costs tens of microseconds per
message in interpreter overhead, ``scan`` does the same walk in one Numba call
and fills a small table with where every field is; it is also the first step of
the decoder's one compiled pass (``fused.check_message``). Why it stays (the
measured figures) is in protowire's docstring. It applies every framing rule
the Python walk applies and is never more lenient: whenever it meets anything
wrong or unusual it just reports failure, and the decoder then runs the Python
walk, which names the field at fault (or, for a legal message this walk does
not handle, decodes it). Tests check the two walks agree on fuzzed messages.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Table layout (int64; unsigned 64-bit values are stored as their bits).
T_VERSION, T_JOB_AT, T_JOB_LEN, T_WORKER, T_SEQUENCE, T_SEED, T_CHECKSUM = range(7)
T_ARRAYS = 7  # then per array field (6 to 11, in order): element count, data offset, data length
TABLE_SIZE = T_ARRAYS + 3 * 6

# Wire dtype strings of the array fields 6..11 (node_ids, indptr: <i8; indices: <i4; weights: <f4).
_DTYPES = np.frombuffer(b"<i8<i8<i4<f4<f4<f4", dtype=np.uint8).reshape(6, 3).copy()
_MAX_FIELD = np.uint64((1 << 29) - 1)  # protobuf's largest field number; parsers refuse larger ones
_ITEMSIZES = np.array([8, 8, 4, 4, 4, 4], dtype=np.int64)


@njit(cache=True, nogil=True)
def _varint(buf, pos, end):  # pragma: no cover - compiled
    """(value, next position), or (0, -1) when truncated, longer than 10 bytes or over 64 bits."""
    result = np.uint64(0)
    shift = 0
    while True:
        if pos >= end:
            return np.uint64(0), -1
        byte = buf[pos]
        pos += 1
        if shift == 63 and (byte & 0x7F) > 1:
            return np.uint64(0), -1
        result |= np.uint64(byte & 0x7F) << np.uint64(shift)
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            return np.uint64(0), -1


@njit(cache=True, nogil=True)
def _skip(buf, pos, end, wire_type):  # pragma: no cover - compiled
    """Position after a field's value of this wire type, or -1 if it is malformed."""
    if wire_type == 0:
        return _varint(buf, pos, end)[1]
    if wire_type == 1:
        return pos + 8 if pos + 8 <= end else -1
    if wire_type == 5:
        return pos + 4 if pos + 4 <= end else -1
    if wire_type == 2:
        size, pos = _length(buf, pos, end)
        return pos + size if pos >= 0 else -1
    return -1


@njit(cache=True, nogil=True)
def _key(buf, pos, end):  # pragma: no cover - compiled
    """A field's (number, wire type, next position); position -1 when malformed or the number is out of range."""
    key, pos = _varint(buf, pos, end)
    number = key >> np.uint64(3)
    if pos < 0 or number == 0 or number > _MAX_FIELD:
        return np.uint64(0), np.int64(0), -1
    return number, np.int64(key & np.uint64(7)), pos


@njit(cache=True, nogil=True)
def _field(buf, pos, end, last):  # pragma: no cover - compiled
    """The next field numbered up to ``last`` (later ones are skipped): (number, wire type, next position);
    number 0 at ``end``, position -1 when malformed."""
    while pos < end:
        number, wire_type, pos = _key(buf, pos, end)
        if pos < 0 or number <= last:
            return number, wire_type, pos
        pos = _skip(buf, pos, end, wire_type)
        if pos < 0:
            break
    return np.uint64(0), np.int64(0), pos


@njit(cache=True, nogil=True)
def _length(buf, pos, end):  # pragma: no cover - compiled
    """A length prefix: (length, next position), or (0, -1) when it is malformed or runs past ``end``."""
    size, pos = _varint(buf, pos, end)
    if pos < 0 or size > np.uint64(end - pos):
        return np.int64(0), -1
    return np.int64(size), pos


@njit(cache=True, nogil=True)
def _array(buf, start, end, index, table):  # pragma: no cover - compiled
    """Walk the Array message in buf[start:end] for array field ``index``; False on anything wrong."""
    seen = 0
    count = 0
    shape = np.uint64(0)
    data_at = start
    data_len = 0
    pos = start
    while pos < end:
        number, wire_type, pos = _field(buf, pos, end, 4)
        if pos < 0:
            return False
        if number == 0:
            break
        if number == 2 and wire_type == 0:  # an unpacked repeated shape
            shape, pos = _varint(buf, pos, end)
            if pos < 0:
                return False
            count += 1
            continue
        bit = 1 << np.int64(number)
        if wire_type != 2 or seen & bit:
            return False
        seen |= bit
        length, pos = _length(buf, pos, end)
        if pos < 0:
            return False
        if number == 1:
            if length != 3:
                return False
            for i in range(3):
                if buf[pos + i] != _DTYPES[index, i]:
                    return False
        elif number == 2:
            item = pos
            while item < pos + length:
                shape, item = _varint(buf, item, pos + length)
                if item < 0:
                    return False
                count += 1
        elif number == 4:
            data_at = pos
            data_len = length
        pos += length
    if not seen & 2 or count != 1 or shape > np.uint64(end):  # (more elements than bytes: wrong anyway)
        return False
    elements = np.int64(shape)
    if data_len != elements * _ITEMSIZES[index]:
        return False
    table[T_ARRAYS + 3 * index] = elements
    table[T_ARRAYS + 3 * index + 1] = data_at
    table[T_ARRAYS + 3 * index + 2] = data_len
    return True


@njit(cache=True, nogil=True)
def scan(buf, table):  # pragma: no cover - compiled
    """Walk a whole Subgraph message (uint8 array) into ``table``; True when it is well framed.

    Well framed means: every field parses, scalars have their wire types and
    appear at most once, format_version is 1, and each of the six arrays appears
    once with the right dtype, one non-negative length and exactly that many
    bytes of data. Contents (checksum, CSR structure) are checked elsewhere.
    """
    end = buf.size
    seen = 0
    for i in range(TABLE_SIZE):
        table[i] = 0
    pos = 0
    while pos < end:
        number, wire_type, pos = _field(buf, pos, end, 12)
        if pos < 0:
            return False
        if number == 0:
            break
        bit = 1 << np.int64(number)
        if seen & bit:
            return False
        seen |= bit
        if 6 <= number <= 11:
            if wire_type != 2:
                return False
            size, pos = _length(buf, pos, end)
            if pos < 0 or not _array(buf, pos, pos + size, np.int64(number) - 6, table):
                return False
            pos += size
        elif number == 2:
            if wire_type != 2:
                return False
            size, pos = _length(buf, pos, end)
            if pos < 0:
                return False
            table[T_JOB_AT] = pos
            table[T_JOB_LEN] = size
            pos += size
        elif number == 12:
            if wire_type != 1 or pos + 8 > end:
                return False
            value = np.uint64(0)
            for i in range(8):
                value |= np.uint64(buf[pos + i]) << np.uint64(8 * i)
            table[T_CHECKSUM] = np.int64(value)
            pos += 8
        else:  # 1, 3, 4, 5: varints
            if wire_type != 0:
                return False
            value, pos = _varint(buf, pos, end)
            if pos < 0:
                return False
            table[np.int64(number) - 1 if number == 1 else np.int64(number)] = np.int64(value)
    if table[T_VERSION] != 1:
        return False
    return seen & 0b111111000000 == 0b111111000000
