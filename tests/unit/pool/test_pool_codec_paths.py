"""The codec's compiled paths against its Python paths: never more lenient, the same results when they accept.

``decode_owned`` trusts ``scan``'s table whenever ``scan`` says a message is
well framed, so for any bytes at all: if ``scan`` accepts, the Python walk must
accept too and find the same metadata and the same array bytes. Likewise the
fused kernels (frame+hash+check on encode, walk+hash+check on decode) must
write the same bytes as the Python encoder and accept only what the Python
decoder decodes to the same subgraph.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saintpipe.core.errors import DecodeError, InvalidArgument
from saintpipe.services.pool.codec import fused, scan
from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph
from saintpipe.services.pool.codec.decoder import decode_walked, fields, fields_from_table
from saintpipe.services.pool.synthetic import random_subgraph
from saintpipe.core.subgraph import Subgraph

MESSAGES = [
    encode_subgraph(random_subgraph(n, e, seed=s, job_id=f"j{s}", worker=s - 1, sequence=7 * s))
    for s, (n, e) in enumerate([(0, 0), (3, 4), (9, 20)])
]
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def agree(data: bytes) -> bool:
    """Assert the walks agree on ``data``; True when ``scan`` accepted it."""
    table = np.empty(scan.TABLE_SIZE, dtype=np.int64)
    if not scan.scan(np.frombuffer(data, dtype=np.uint8), table):
        return False
    try:
        meta, arrays = fields_from_table(data, table)
    except DecodeError as fast_error:  # a job id that is not UTF-8: both walks must say so
        try:
            fields(data)
        except DecodeError as slow_error:
            assert str(fast_error) == str(slow_error)
            return True
        raise AssertionError(f"the Python walk accepts what the table refused: {fast_error}") from None
    try:
        slow_meta, slow_arrays = fields(data)
    except DecodeError as exc:
        raise AssertionError(f"scan accepted what the Python walk refuses: {exc}") from None
    assert meta == slow_meta
    for name, arr in arrays.items():
        assert arr.dtype == slow_arrays[name].dtype
        assert arr.tobytes() == slow_arrays[name].tobytes()
    return True


def test_scan_accepts_what_the_encoder_writes():
    assert all(agree(m) for m in MESSAGES)


def test_scan_skips_unknown_fields_like_the_python_walk():
    tiny = random_subgraph(2, 1, seed=0)
    with_unknown = encode_subgraph(tiny) + b"\x98\x06\x05" + b"\x9a\x06\x03abc"  # field 99: varint, bytes
    assert agree(with_unknown)
    assert decode_subgraph(with_unknown).equals(tiny)


def test_scan_refuses_what_the_python_walk_refuses():
    data = MESSAGES[1]
    for bad in (data + b"\x08\x01", data + b"\x1a\x00", data[:-3], b"\x08\x02" + data[2:]):
        assert not agree(bad)


@FUZZ
@given(which=st.integers(0, len(MESSAGES) - 1), data=st.data())
def test_mangled_messages(which, data):
    msg = bytearray(MESSAGES[which])
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["set", "flip", "cut", "splice"]))
        if kind == "set" and msg:
            msg[data.draw(st.integers(0, len(msg) - 1))] = data.draw(st.integers(0, 255))
        elif kind == "flip" and msg:
            bit = data.draw(st.integers(0, len(msg) * 8 - 1))
            msg[bit // 8] ^= 1 << (bit % 8)
        elif kind == "cut":
            msg = msg[: data.draw(st.integers(0, len(msg)))]
        else:
            start = data.draw(st.integers(0, len(msg)))
            removed = data.draw(st.integers(0, 12))
            msg[start : start + removed] = data.draw(st.binary(max_size=12))
    agree(bytes(msg))


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes(blob):
    agree(blob)


# -- the fused kernels (services/pool/codec/fused.py) against the Python path -------------------------------


def python_path(monkeypatch):
    monkeypatch.setattr(fused, "AVAILABLE", False)


CASES = [
    random_subgraph(0, 0, seed=1),
    random_subgraph(1, 0, seed=2, job_id="ü-job", worker=-1, sequence=2**63 - 1),
    random_subgraph(5, 3, seed=3, job_id="x" * 300, worker=2**40, sequence=-(2**63)),
    random_subgraph(200, 3000, seed=4, job_id="j"),
    dataclasses.replace(random_subgraph(7, 9, seed=5), seed=2**64 - 1),
]


def test_fused_encoding_is_byte_for_byte_the_python_encoding(monkeypatch):
    assert fused.AVAILABLE, "xxhash's C functions should be callable from kernels with the pinned wheel"
    fast = [encode_subgraph(sg) for sg in CASES]
    python_path(monkeypatch)
    assert fast == [encode_subgraph(sg) for sg in CASES]


def test_fused_decoding_agrees_with_the_python_decoding(monkeypatch):
    messages = [encode_subgraph(sg) for sg in CASES]
    table = np.empty(scan.TABLE_SIZE, dtype=np.int64)
    for msg in messages:
        assert fused.check_message(np.frombuffer(msg, dtype=np.uint8), table) == fused.OK
    fast = [decode_subgraph(m) for m in messages]
    python_path(monkeypatch)
    for sg, a, b in zip(CASES, fast, [decode_subgraph(m) for m in messages], strict=True):
        assert a.equals(sg) and b.equals(sg)
        assert (a.job_id, a.worker, a.sequence, a.seed) == (b.job_id, b.worker, b.sequence, b.seed)


def test_fused_encoder_refuses_what_the_checks_refuse(monkeypatch):
    sg = random_subgraph(6, 10, seed=6)
    broken = dataclasses.replace(sg, indices=sg.indices[::-1].copy())
    with pytest.raises(InvalidArgument, match="cannot encode: subgraph indices") as fast:
        encode_subgraph(broken)
    assert encode_subgraph(broken, validate=False)  # unchecked, as asked
    python_path(monkeypatch)
    with pytest.raises(InvalidArgument) as slow:
        encode_subgraph(broken)
    assert str(fast.value) == str(slow.value)


@FUZZ
@given(which=st.integers(0, len(MESSAGES) - 1), data=st.data())
def test_fused_check_accepts_only_what_the_python_path_decodes_to_the_original(which, data):
    msg = bytearray(MESSAGES[which])
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(msg) - 1))
        msg[pos] = data.draw(st.integers(0, 255))
    table = np.empty(scan.TABLE_SIZE, dtype=np.int64)
    if fused.check_message(np.frombuffer(bytes(msg), dtype=np.uint8), table) == fused.OK:
        assert decode_subgraph(MESSAGES[which]).equals(decode_walked(bytes(msg)))


def _python_encoded(sg: Subgraph, monkeypatch) -> bytes:
    with monkeypatch.context() as patch:
        patch.setattr(fused, "AVAILABLE", False)
        return encode_subgraph(sg)


@pytest.mark.parametrize("job_len", range(0, 12))
@pytest.mark.parametrize("n", [13, 14, 15, 16])
def test_array_data_is_aligned_when_padding_lengthens_the_length_varint(n, job_len, monkeypatch):
    # A node_ids field of 14 ids (112 bytes) has a length near 128: for some start positions every padding
    # of up to one alignment's worth of bytes lengthened the varint past the aligned position, and the two
    # encoders then picked different (misaligned) paddings. Both must pick the same, aligned one.
    sg = random_subgraph(n, 0, seed=128, job_id="j" * job_len, worker=-1, sequence=-1)
    data = encode_subgraph(sg)
    assert data == _python_encoded(sg, monkeypatch)
    table = np.empty(scan.TABLE_SIZE, dtype=np.int64)
    assert scan.scan(np.frombuffer(data, dtype=np.uint8), table)
    _, arrays = fields_from_table(data, table)
    base = np.frombuffer(data, dtype=np.uint8).ctypes.data
    for name, arr in arrays.items():
        assert arr.size == 0 or (arr.ctypes.data - base) % 8 == 0, f"{name} not 8-aligned in the message"
