"""The bulk data plane's framing: requests and reply headers both ways, and what a hostile frame gets."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import DecodeError
from saintpipe.services.feature_shard import bulk_wire as bw


def _join(pieces) -> bytes:
    return b"".join(bytes(p) for p in pieces)


def test_a_request_carries_flags_token_and_ids():
    ids = np.array([3, 1, 2**40], dtype=np.int64)
    frame = _join(bw.encode_request(ids, float16=True, token="s3cret"))
    flags, token_len = bw.parse_request_head(frame[:12])
    assert flags == bw.FLAG_FLOAT16 and token_len == 6
    assert frame[12:18] == b"s3cret"
    assert bw.parse_count(frame[18:26], limit=10) == 3
    np.testing.assert_array_equal(np.frombuffer(frame[26:], "<i8"), ids)
    plain = _join(bw.encode_request(ids[:1], float16=False, token=None))
    assert bw.parse_request_head(plain[:12]) == (0, 0) and len(plain) == 12 + 8 + 8


@pytest.mark.parametrize(
    "head, match",
    [
        (b"\x16\x03\x01\x02" + bytes(8), "not a bulk gather request"),  # a TLS hello on a plaintext port
        (b"GET / HTTP/1.1"[:12], "not a bulk gather request"),
        (bw.REQUEST_MAGIC + (2).to_bytes(4, "little") + bytes(4), "unknown bits"),
        (bw.REQUEST_MAGIC + bytes(4) + (bw.MAX_TOKEN_BYTES + 1).to_bytes(4, "little"), "token of 4097 bytes"),
    ],
)
def test_a_bad_request_head_is_refused_by_name(head, match):
    with pytest.raises(DecodeError, match=match):
        bw.parse_request_head(head)


def test_an_id_count_over_the_limit_is_refused_before_allocation():
    with pytest.raises(DecodeError, match="request of 18446744073709551615 ids exceeds this server's limit of 99"):
        bw.parse_count(b"\xff" * 8, limit=99)


def test_reply_heads_round_trip_and_bad_ones_are_refused():
    head = bw.encode_reply_head(bw.OK, np.dtype(np.float16), 7, 24)
    assert bw.parse_reply_head(head) == (bw.OK, np.dtype("<f2"), 7, 24, 0)
    error = bw.encode_reply_head(bw.INVALID_ARGUMENT, np.dtype(np.float32), 0, 24, "node id 9 is not served")
    status, _, _, _, length = bw.parse_reply_head(error[: bw.REPLY_HEAD.size])
    assert status == bw.INVALID_ARGUMENT and error[bw.REPLY_HEAD.size:].decode() == "node id 9 is not served"
    assert length == len("node id 9 is not served")
    bad = bytearray(head)
    bad[4] = 99
    with pytest.raises(DecodeError, match="status 99 is unknown"):
        bw.parse_reply_head(bytes(bad))
    bad = bytearray(head)
    bad[8] = 5
    with pytest.raises(DecodeError, match="dtype code 5"):
        bw.parse_reply_head(bytes(bad))
    with pytest.raises(DecodeError, match="not a bulk gather reply"):
        bw.parse_reply_head(b"HTTP" + head[4:])
    with pytest.raises(ValueError, match="token of 4097 bytes"):
        bw.encode_request(np.zeros(1, np.int64), float16=False, token="x" * 4097)
