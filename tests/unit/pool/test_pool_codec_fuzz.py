"""Fuzzing the decoder: truncated and corrupted messages never crash it and never decode to a wrong subgraph.

The property, for any mangling of a valid message: ``decode_subgraph`` either
raises DecodeError or returns a subgraph equal to the original (a change
confined to padding or to unknown fields is harmless). Whenever it accepts
bytes, the generated protobuf classes parse them to the same values
(differential check against the reference implementation).
"""

from __future__ import annotations

import google.protobuf.message
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saintpipe.core.errors import DecodeError
from saintpipe.protos import subgraph_pb2
from saintpipe.services.pool.codec import ARRAYS, decode_subgraph, encode_subgraph
from saintpipe.services.pool.synthetic import random_subgraph

ORIGINALS = [
    random_subgraph(n, e, seed=s, job_id=f"job{s}", worker=s, sequence=10 * s)
    for s, (n, e) in enumerate([(0, 0), (2, 1), (7, 12), (40, 200)])
]
MESSAGES = [encode_subgraph(sg) for sg in ORIGINALS]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(data: bytes, original) -> None:
    try:
        back = decode_subgraph(data)
    except DecodeError:
        return
    assert back.equals(original), "decoded a subgraph other than the one encoded"
    msg = subgraph_pb2.Subgraph.FromString(data)  # the reference parser accepts it too ...
    assert (msg.job_id, msg.worker, msg.sequence, msg.seed) == (
        back.job_id,
        back.worker,
        back.sequence,
        back.seed,
    )
    for name in ARRAYS:  # ... and reads the same arrays
        assert getattr(msg, name).data == getattr(back, name).tobytes()


@FUZZ
@given(which=st.integers(0, len(MESSAGES) - 1), data=st.data())
def test_truncated_messages(which, data):
    msg = MESSAGES[which]
    cut = data.draw(st.integers(0, len(msg) - 1))
    check(msg[:cut], ORIGINALS[which])


@FUZZ
@given(which=st.integers(0, len(MESSAGES) - 1), data=st.data())
def test_corrupted_bytes(which, data):
    msg = bytearray(MESSAGES[which])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(msg) - 1))
        msg[pos] = data.draw(st.integers(0, 255))
    check(bytes(msg), ORIGINALS[which])


@FUZZ
@given(which=st.integers(0, len(MESSAGES) - 1), data=st.data())
def test_bit_flips(which, data):
    msg = np.frombuffer(MESSAGES[which], dtype=np.uint8).copy()
    bit = data.draw(st.integers(0, msg.size * 8 - 1))
    msg[bit // 8] ^= np.uint8(1 << (bit % 8))
    check(msg.tobytes(), ORIGINALS[which])


@FUZZ
@given(which=st.integers(0, len(MESSAGES) - 1), data=st.data())
def test_inserted_and_deleted_spans(which, data):
    msg = MESSAGES[which]
    start = data.draw(st.integers(0, len(msg)))
    removed = data.draw(st.integers(0, 16))
    inserted = data.draw(st.binary(max_size=16))
    check(msg[:start] + inserted + msg[start + removed :], ORIGINALS[which])


@FUZZ
@given(st.binary(max_size=512))
def test_arbitrary_bytes(blob):
    try:
        decode_subgraph(blob)
    except DecodeError:
        pass


def test_a_field_number_above_protobufs_largest_is_refused_as_the_reference_parser_refuses_it():
    # Key 0x100000015: field 2**29 + 2, wire type 5 (I32), then four bytes (found by the fuzzer above).
    data = b"\x95\x80\x80\x80\x10\x00\x00\x00\x00" + MESSAGES[1]
    with pytest.raises(google.protobuf.message.DecodeError):
        subgraph_pb2.Subgraph.FromString(data)
    with pytest.raises(DecodeError, match="field number"):
        decode_subgraph(data)
