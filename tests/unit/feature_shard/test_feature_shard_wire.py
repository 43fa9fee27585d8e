"""The hand-written GatherChunk codec agrees with the generated protobuf class, both ways."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saintpipe.core.errors import DecodeError
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.feature_shard.wire import allocate_chunk, decode_chunk, decode_ids, encode_ids


def encode_chunk(offset: int, rows: np.ndarray) -> bytes:
    """A serialized GatherChunk holding ``rows``, made as the server makes its answers."""
    wire, view = allocate_chunk(offset, rows.shape[0], rows.shape[1], rows.dtype)
    view[...] = rows
    return wire


# Random chunks: rows x dim of either dtype, at any offset.
chunks = lambda test: settings(max_examples=60, deadline=None)(given(  # noqa: E731
    rows=st.integers(0, 40),
    dim=st.integers(1, 33),
    offset=st.integers(0, 2**40),
    dtype=st.sampled_from(["float32", "float16"]),
    seed=st.integers(0, 2**31),
)(test))


@chunks
def test_round_trip_through_the_generated_class(rows, dim, offset, dtype, seed):
    data = np.random.default_rng(seed).standard_normal((rows, dim)).astype(dtype)
    wire = encode_chunk(offset, data)
    message = pb.GatherChunk.FromString(wire)  # what any protobuf reader sees
    assert (message.offset, message.dtype, list(message.shape)) == (offset, dtype, [rows, dim])
    assert message.rows == data.tobytes()
    got_offset, got = decode_chunk(message.SerializeToString())  # the generated encoding, decoded by hand
    assert got_offset == offset and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, data)
    np.testing.assert_array_equal(decode_chunk(wire)[1], data)


@chunks
def test_allocated_chunk_is_filled_in_place_aligned_and_readable_by_both(rows, dim, offset, dtype, seed):
    data = np.random.default_rng(seed).standard_normal((rows, dim)).astype(dtype)
    wire, view = allocate_chunk(offset, rows, dim, np.dtype(dtype))
    assert isinstance(wire, bytes) and view.flags.writeable and view.shape == (rows, dim)
    view[...] = data
    del view
    message = pb.GatherChunk.FromString(wire)
    assert (message.offset, message.dtype, list(message.shape)) == (offset, dtype, [rows, dim])
    assert message.rows == data.tobytes() and not message.padding.strip(b"\0")
    got_offset, got = decode_chunk(wire)
    assert got_offset == offset and (rows == 0 or got.ctypes.data % 16 == 0)  # rows 16-byte aligned
    np.testing.assert_array_equal(got, data)


def test_decoder_takes_any_field_order_and_skips_unknown_fields():
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    reordered = (
        pb.GatherChunk(rows=data.tobytes()).SerializeToString()
        + bytes([(9 << 3) | 0, 7])  # unknown varint field 9
        + bytes([(10 << 3) | 5])
        + b"\0\0\0\0"  # unknown fixed32 field 10
        + pb.GatherChunk(offset=5, dtype="float32", shape=[3, 2]).SerializeToString()
    )
    offset, rows = decode_chunk(reordered)
    assert offset == 5
    np.testing.assert_array_equal(rows, data)


def test_decoded_rows_are_a_view_not_a_copy():
    wire = encode_chunk(0, np.ones((4, 4), np.float32))
    _, rows = decode_chunk(wire)
    assert not rows.flags.writeable and not rows.flags.owndata


@pytest.mark.parametrize(
    "message, error",
    [
        (
            pb.GatherChunk(rows=b"\0" * 8, dtype="float32", shape=[1, 3]),
            r"GatherChunk.rows: 8 bytes, but shape \[1, 3\]",
        ),
        (pb.GatherChunk(rows=b"", dtype="int8", shape=[0, 3]), "unknown dtype 'int8'"),
        (pb.GatherChunk(rows=b"", dtype="float32", shape=[3]), "GatherChunk.shape"),
        (pb.GatherChunk(rows=b"", dtype="float32", shape=[-1, 3]), "GatherChunk.shape"),
    ],
)
def test_malformed_chunks_name_the_field(message, error):
    with pytest.raises(DecodeError, match=error):
        decode_chunk(message.SerializeToString())


def test_truncated_chunk():
    wire = encode_chunk(3, np.ones((2, 2), np.float32))
    with pytest.raises(DecodeError, match=r"GatherChunk.rows: claims 16 bytes, only 15 remain"):
        decode_chunk(wire[:-1])


@pytest.mark.parametrize(
    "data, error",
    [
        (bytes([(1 << 3) | 0, 0x80]), "GatherChunk.offset: truncated varint"),
        (bytes([(3 << 3) | 2, 0xFF]), "GatherChunk.dtype: truncated varint"),
        (bytes([(4 << 3) | 2, 2, 0x80, 0x80]), "GatherChunk.shape: truncated varint"),
        (bytes([(9 << 3) | 1, 0, 0]), "GatherChunk: field 9 truncated"),
        (bytes([(2 << 3) | 3]), "GatherChunk.rows: has unsupported wire type 3"),
        (bytes([0x02, 0]), "GatherChunk: field number 0"),
        (b"\x80" * 11, "GatherChunk: varint longer than 10 bytes"),
    ],
)
def test_broken_framing_names_the_field(data, error):
    with pytest.raises(DecodeError, match=error):
        decode_chunk(data)


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, 200), flips=st.lists(st.tuples(st.integers(0, 199), st.integers(0, 7)), max_size=3))
def test_mangled_chunks_decode_or_raise_decode_error(cut, flips):
    wire, view = allocate_chunk(7, 5, 3, np.dtype("float32"))
    view[...] = np.arange(15, dtype=np.float32).reshape(5, 3)
    del view
    data = bytearray(wire[:cut])
    for pos, bit in flips:
        if pos < len(data):
            data[pos] ^= 1 << bit
    try:
        offset, rows = decode_chunk(bytes(data))
    except DecodeError:
        return
    assert rows.ndim == 2 and offset >= 0


def test_ids_round_trip_little_endian():
    ids = np.array([0, 1, 2**40, 7], dtype=np.int64)
    wire = encode_ids(ids.astype(">i8"))
    assert wire[:8] == b"\0" * 8 and wire[8] == 1  # little-endian on the wire, whatever the input
    np.testing.assert_array_equal(decode_ids(wire), ids)
    with pytest.raises(DecodeError, match="GatherRequest.ids: 33 bytes"):
        decode_ids(wire + b"\0")
