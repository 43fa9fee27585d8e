"""The decoder's compiled walk (``scan``) against its Python walk: never more lenient, same fields when it accepts.

``decode_owned`` trusts ``scan``'s table whenever ``scan`` says a message is
well framed, so for any bytes at all: if ``scan`` accepts, the Python walk must
accept too and find the same metadata and the same array bytes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saintpipe.errors import DecodeError
from services.pool import scan
from services.pool.codec import _fields, _fields_from_table, decode_subgraph, encode_subgraph
from services.pool.synthetic import random_subgraph

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
        meta, arrays = _fields_from_table(data, table)
    except DecodeError as fast_error:  # a job id that is not UTF-8: both walks must say so
        try:
            _fields(data)
        except DecodeError as slow_error:
            assert str(fast_error) == str(slow_error)
            return True
        raise AssertionError(f"the Python walk accepts what the table refused: {fast_error}") from None
    try:
        slow_meta, slow_arrays = _fields(data)
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
