"""The shared hand-written protobuf reader: agrees with the generated classes, bounds-checks, names the field."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saintpipe.core import protowire as pw
from saintpipe.core.errors import DecodeError
from saintpipe.protos import feature_shard_pb2 as pb

EDGES = [0, 1, 127, 128, 300, 2**31, 2**63 - 1, 2**63, 2**64 - 1]


@pytest.mark.parametrize("value", EDGES)
def test_varints_round_trip(value):
    data = pw.varint(value)
    assert len(data) == pw.varint_size(value)
    assert pw.read_varint(data, 0, len(data), "x") == (value, len(data))
    assert pw.signed(value) == (value - 2**64 if value >= 2**63 else value)
    assert pw.unsigned(pw.signed(value)) == value


@pytest.mark.parametrize(
    "data, error",
    [
        (b"\x80", "where: truncated varint at byte 1"),
        (b"\xff" * 10 + b"\x01", "where: varint longer than 10 bytes"),
        (b"\xff" * 9 + b"\x02", "where: varint exceeds 64 bits"),
    ],
)
def test_broken_varints(data, error):
    with pytest.raises(DecodeError, match=error):
        pw.read_varint(data, 0, len(data), "where")


@settings(max_examples=100, deadline=None)
@given(
    offset=st.integers(0, 2**64 - 1),
    rows=st.binary(max_size=300),
    dtype=st.text(max_size=20),
    shape=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
    flag=st.booleans(),
)
def test_fields_are_what_the_generated_class_parses(offset, rows, dtype, shape, flag):
    data = pb.GatherChunk(
        offset=offset, rows=rows, dtype=dtype, shape=shape, in_shared_memory=flag
    ).SerializeToString()
    got = {}
    for number, wire_type, value, length in pw.iter_fields(data, 0, len(data), "GatherChunk"):
        if wire_type == pw.LEN:
            got[number] = pw.packed_int64(data, value, value + length, "s") if number == 4 else data[
                value : value + length
            ]
        else:
            got[number] = value
    assert got.get(1, 0) == offset and got.get(2, b"") == rows and got.get(3, b"").decode() == dtype
    assert got.get(4, []) == shape and bool(got.get(6, 0)) == flag


def test_fixed_width_fields_and_offsets():
    data = b"\x00" * 3 + pw.tag(1, pw.I64) + (5).to_bytes(8, "little") + pw.tag(2, pw.I32) + b"\x07\0\0\0"
    data += pw.tag(3, pw.LEN) + pw.varint(2) + b"ab"
    assert list(pw.iter_fields(data, 3, len(data), "m")) == [(1, pw.I64, 5, 0), (2, pw.I32, 7, 0), (3, pw.LEN, 19, 2)]


NAMES = {1: "M.count", 2: "M.blob"}


@pytest.mark.parametrize(
    "data, error",
    [
        (pw.tag(1, pw.VARINT) + b"\x80", "M.count: truncated varint at byte 2"),
        (pw.tag(2, pw.LEN) + pw.varint(5) + b"abc", "M.blob: claims 5 bytes, only 3 remain"),
        (pw.tag(2, pw.LEN) + b"\x80", "M.blob: truncated varint"),
        (pw.tag(7, pw.LEN) + pw.varint(5), "M: field 7 claims 5 bytes, only 0 remain"),
        (pw.tag(7, pw.I64) + b"\0", "M: field 7 truncated at byte 1"),
        (pw.tag(1, pw.I32), "M.count: truncated at byte 1"),
        (pw.tag(2, pw.SGROUP), "M.blob: has unsupported wire type 3"),
        (pw.tag(0, pw.VARINT) + b"\x01", "M: field number 0 at byte 1"),
        (b"\x80", "M: truncated varint at byte 1"),
    ],
)
def test_errors_name_the_field(data, error):
    with pytest.raises(DecodeError, match=error):
        list(pw.iter_fields(data, 0, len(data), "M", NAMES))


def test_a_field_may_not_run_past_the_end_given():
    inner = pw.tag(2, pw.LEN) + pw.varint(3) + b"abc"
    with pytest.raises(DecodeError, match="M.blob: claims 3 bytes, only 2 remain"):
        list(pw.iter_fields(inner + b"more", 0, len(inner) - 1, "M", NAMES))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_walk_within_bounds_or_raise_decode_error(blob):
    try:
        fields = list(pw.iter_fields(blob, 0, len(blob), "M", NAMES))
    except DecodeError:
        return
    for number, wire_type, value, length in fields:
        assert number > 0 and wire_type in (pw.VARINT, pw.I64, pw.LEN, pw.I32)
        if wire_type == pw.LEN:
            assert 0 <= value and value + length <= len(blob)
