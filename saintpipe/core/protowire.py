"""The protobuf wire format by hand: saintpipe's one hand-written reader, and the writer's few helpers.

The generated classes in :mod:`saintpipe.protos` stay the schema's reference and parse every small message.
Two messages are read here instead, ``Subgraph`` (:mod:`saintpipe.services.pool.codec`) and ``GatherChunk``
(:mod:`saintpipe.services.feature_shard.wire`), because they are megabytes of array bytes and the generated
classes (upb) copy every ``bytes`` field on parse and again on each access, while this reader copies nothing:
its callers take zero-copy numpy views of the message. ``saintpipe bench pool`` and ``saintpipe bench
features`` compare the readers on the same bytes (figures: docs/explanation/decisions.md).

The ``Subgraph`` walk also has a compiled fast path, ``scan`` in :mod:`saintpipe.services.pool.codec.scan`
(Numba): the same framing rules, never more lenient, and it only says "well framed" or not; on "not" the
decoder runs the Python walk over this module, which names the field at fault. The decoder's one compiled pass
(walk, hash and checks: ``fused.check_message``) needs it. ``tests/unit/pool/test_pool_codec_paths.py`` checks
both walks agree on fuzzed messages.

Reading follows protobuf's rules (any field order, unknown fields skipped, groups refused) and trusts nothing:
a truncated, overlong or out-of-bounds field raises :class:`~saintpipe.core.errors.DecodeError` naming it. Each
decoder applies its message's own policy (required fields, repeats, wire types) on top.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from saintpipe.core.errors import DecodeError

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
_MAX_KEY = (1 << 32) - 1  # field number 2**29 - 1 with wire type 7
_U64 = 1 << 64
_NO_NAMES: Mapping[int, str] = {}


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
    """The key of field number ``field`` with this wire type."""
    return varint((field << 3) | wire_type)


def signed(value: int) -> int:
    """A decoded varint as protobuf's int64 (two's complement in 64 bits)."""
    return value - _U64 if value >= 1 << 63 else value


def unsigned(value: int) -> int:
    """An int64 as the unsigned value its varint encodes."""
    return value + _U64 if value < 0 else value


def read_varint(buf: bytes | bytearray | memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
    """Decode the varint at ``buf[pos:end]``; returns (value, next position).

    Raises:
        DecodeError: ``where``: truncated, longer than 10 bytes, or over 64 bits.
    """
    if pos < end and buf[pos] < 0x80:  # the common one-byte case
        return buf[pos], pos + 1
    try:
        return _varint(buf, pos, end)
    except _Malformed as exc:
        raise DecodeError(f"{where}: {exc}") from None


class _Malformed(Exception):
    """What is wrong at a position; the caller adds which message or field it is in."""


def _varint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise _Malformed(f"truncated varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise _Malformed(f"varint longer than 10 bytes at byte {pos}")
    if result >= _U64:
        raise _Malformed(f"varint exceeds 64 bits at byte {pos}")
    return result, pos


def iter_fields(
    buf: bytes | bytearray | memoryview, start: int, end: int, where: str, names: Mapping[int, str] = _NO_NAMES
) -> Iterator[tuple[int, int, int, int]]:
    """Walk the fields of the message in ``buf[start:end]``, checking each lies within it.

    Yields ``(field number, wire type, value, length)``: for VARINT, I64 and I32 fields ``value`` is the
    integer and ``length`` is 0; for LEN fields ``value`` is the offset of the payload in ``buf`` and
    ``length`` its size. Groups (deprecated, unused by saintpipe) are refused.

    Args:
        buf, start, end: the message.
        where: the message's name, for errors outside any field.
        names: field number -> the name errors in that field give (e.g.
            ``"GatherChunk.rows"``); other fields are called ``where: field N``.

    Raises:
        DecodeError: naming the field that is truncated, runs past ``end`` or has a group's wire type.
    """
    pos = start
    field = 0
    try:
        while pos < end:
            field = 0  # a key's errors belong to no field
            key = buf[pos]
            if key < 0x80:  # one-byte varints inline: this walk runs on every feature chunk
                pos += 1
            else:
                key, pos = _varint(buf, pos, end)
            if key < 8:
                raise _Malformed(f"field number 0 at byte {pos}")
            if key > _MAX_KEY:  # protobuf parsers refuse field numbers above 2**29 - 1
                raise _Malformed(f"field number {key >> 3} above the largest allowed ({_MAX_KEY >> 3}) at byte {pos}")
            field, wire_type = key >> 3, key & 7
            if wire_type == VARINT or wire_type == LEN:
                if pos < end and buf[pos] < 0x80:
                    value = buf[pos]
                    pos += 1
                else:
                    value, pos = _varint(buf, pos, end)
                if wire_type == VARINT:
                    yield field, wire_type, value, 0
                    continue
                if pos + value > end:
                    raise _Malformed(f"claims {value} bytes, only {end - pos} remain")
                yield field, wire_type, pos, value
                pos += value
            elif wire_type == I64 or wire_type == I32:
                size = 8 if wire_type == I64 else 4
                if pos + size > end:
                    raise _Malformed(f"truncated at byte {pos}")
                yield field, wire_type, int.from_bytes(buf[pos : pos + size], "little"), 0
                pos += size
            else:
                raise _Malformed(f"has unsupported wire type {wire_type}")
    except _Malformed as exc:
        name = names.get(field)
        if name:
            raise DecodeError(f"{name}: {exc}") from None
        raise DecodeError(f"{where}: field {field} {exc}" if field else f"{where}: {exc}") from None


def packed_int64(buf: bytes | bytearray | memoryview, start: int, end: int, where: str) -> list[int]:
    """The values of a packed ``repeated int64`` field whose payload is ``buf[start:end]``.

    Raises:
        DecodeError: ``where``: a truncated or overlong varint.
    """
    values = []
    pos = start
    while pos < end:
        value = buf[pos]
        if value < 0x80:
            pos += 1
        else:
            value, pos = read_varint(buf, pos, end, where)
            if value >= 1 << 63:
                value -= _U64
        values.append(value)
    return values
