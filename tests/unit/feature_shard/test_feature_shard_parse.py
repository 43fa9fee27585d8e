"""Requests that cannot be decoded are InvalidArgument naming the field, never anything else."""

from __future__ import annotations

import random

import pytest

from saintpipe.core.errors import InvalidArgument
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.feature_shard.parse import parse_request, short_repr


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x0a\x05ab", "GatherRequest.ids: claims 5 bytes, only 2 remain"),
        (b"\x12\x02\xff\xfe", "GatherRequest.transfer_dtype: not valid UTF-8"),
        (b"\x1a\x03\x0a\x01\xff", "GatherRequest.shared_memory.region: not valid UTF-8"),
        (b"\x1a\x03\x10\xff\xff", "GatherRequest.shared_memory.offset: truncated varint"),
        (b"\x1a\x02\x08", "GatherRequest.shared_memory: claims 2 bytes, only 1 remain"),
        (b"\x00", "GatherRequest: field number 0"),
        (b"\x0a" + b"\xff" * 9 + b"\x7f", "GatherRequest.ids: varint exceeds 64 bits"),
        (b"\x0a" + b"\xff" * 11, "GatherRequest.ids: varint longer than 10 bytes"),
    ],
)
def test_the_message_names_the_field_at_fault(data, message):
    with pytest.raises(InvalidArgument, match="^" + message.replace(".", r"\.")):
        parse_request(pb.GatherRequest, data)


def test_what_protobuf_accepts_is_accepted():
    # Unknown fields, known fields of another wire type and groups are all skipped by protobuf.
    assert parse_request(pb.GatherRequest, b"\x08\x01\x13\x14\xf8\x01\x05").ids == b""
    request = pb.GatherRequest(ids=b"12345678", transfer_dtype="float16")
    assert parse_request(pb.GatherRequest, request.SerializeToString()) == request
    assert parse_request(pb.InfoRequest, b"") == pb.InfoRequest()


def test_faults_found_by_protobuf_alone_still_name_the_message():
    deep = b"\x0b" * 200 + b"\x0c" * 200  # groups nested past protobuf's recursion limit
    with pytest.raises(InvalidArgument, match="^GatherRequest"):
        parse_request(pb.GatherRequest, deep)


def test_random_bytes_give_a_message_or_one_short_line():
    rng = random.Random(7)
    for cls in (pb.GatherRequest, pb.InfoRequest, pb.SharedMemoryProbe):
        for _ in range(2000):
            data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
            try:
                parse_request(cls, data)
            except InvalidArgument as exc:
                text = str(exc)
                assert text.startswith(cls.DESCRIPTOR.name) and "\n" not in text and len(text) < 200


def test_short_repr():
    assert short_repr("int8") == "'int8'"
    cut = short_repr("x" * 10_000)
    assert cut.endswith("...[10000 characters]") and len(cut) < 100
