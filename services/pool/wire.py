"""The protobuf wire format, just enough to frame and walk messages without copying their bytes fields.

The generated classes in saintpipe/protos stay the schema's reference; this
module exists because they copy every bytes field (several times on encode),
while the pool wants one copy on encode and none on decode. The tests check
that what :mod:`saintpipe.services.pool.codec` writes is byte for byte what the generated
classes serialize, and that what it reads agrees with what they parse.
"""

from __future__ import annotations

from collections.abc import Iterator

from saintpipe.core.errors import DecodeError

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
_U64 = 1 << 64


def varint(value: int) -> bytes:
    """Encode an unsigned integer in [0, 2**64) as a base-128 varint."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


def varint_size(value: int) -> int:
    """How many bytes ``varint(value)`` takes."""
    return max(1, (value.bit_length() + 6) // 7)


def tag(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def signed(value: int) -> int:
    """A decoded varint as protobuf's int64 (two's complement in 64 bits)."""
    return value - _U64 if value >= 1 << 63 else value


def unsigned(value: int) -> int:
    """An int64 as the unsigned value its varint encodes."""
    return value + _U64 if value < 0 else value


def read_varint(buf: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    """Decode the varint at ``pos``; returns (value, next position)."""
    if pos < end and buf[pos] < 0x80:  # the common one-byte case
        return buf[pos], pos + 1
    result = shift = 0
    while True:
        if pos >= end:
            raise DecodeError(f"{where}: truncated varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise DecodeError(f"{where}: varint longer than 10 bytes at byte {pos}")
    if result >= _U64:
        raise DecodeError(f"{where}: varint exceeds 64 bits at byte {pos}")
    return result, pos


def iter_fields(buf: bytes, start: int, end: int, where: str) -> Iterator[tuple[int, int, int, int]]:
    """Walk the fields of the message in ``buf[start:end]``.

    Yields ``(field number, wire type, value, length)``: for VARINT, I64 and I32
    fields ``value`` is the integer and ``length`` is 0; for LEN fields ``value``
    is the offset of the payload in ``buf`` and ``length`` its size. Groups
    (deprecated, unused by saintpipe) are refused.
    """
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos, end, where)
        field, wire_type = key >> 3, key & 7
        if field == 0:
            raise DecodeError(f"{where}: field number 0 at byte {pos}")
        if wire_type == VARINT:
            value, pos = read_varint(buf, pos, end, where)
            yield field, wire_type, value, 0
        elif wire_type == I64 or wire_type == I32:
            size = 8 if wire_type == I64 else 4
            if pos + size > end:
                raise DecodeError(f"{where}: field {field} truncated at byte {pos}")
            yield field, wire_type, int.from_bytes(buf[pos : pos + size], "little"), 0
            pos += size
        elif wire_type == LEN:
            size, pos = read_varint(buf, pos, end, where)
            if pos + size > end:
                raise DecodeError(f"{where}: field {field} claims {size} bytes, only {end - pos} remain")
            yield field, wire_type, pos, size
            pos += size
        else:
            raise DecodeError(f"{where}: field {field} has unsupported wire type {wire_type}")
