"""The bulk data plane's framing: a gather as one request frame and one byte stream of rows.

Why a second port beside gRPC (docs/explanation/features.md, docs/benchmarks/features.md): gRPC's Python
runtime copies every answer several times before the client can place it, while a plain (or TLS) TCP
stream is received straight into the caller's array. Everything else stays gRPC; the client learns the
bulk port from ``ShardInfo.bulk_port``.

All integers are little-endian. A connection carries one request at a time
and stays open for the next.

Request::

    magic    4 bytes  b"SPB1"
    flags    u32      bit 0: rows as float16 (a float32 shard narrows them)
    token    u32 length (<= MAX_TOKEN_BYTES) + that many bytes (UTF-8; empty: none)
    count    u64      ids that follow (<= the server's limit)
    ids      count x i64, global node ids

Reply::

    magic    4 bytes  b"SPR1"
    status   u32      OK, or one of the error codes below
    dtype    u32      0 float32, 1 float16
    rows     u64      rows that follow (= count when OK)
    dim      u32      row width
    length   u32      message length (<= MAX_MESSAGE_BYTES), then the UTF-8 message (errors only)
    payload  rows x dim items of dtype (OK only), in request order

A server that closes the connection without a reply (restarting, refusing a
client certificate) is UNAVAILABLE to the client, as in gRPC.
"""

from __future__ import annotations

import struct

import numpy as np

from saintpipe.core.errors import DecodeError

REQUEST_MAGIC = b"SPB1"
REPLY_MAGIC = b"SPR1"
FLAG_FLOAT16 = 1
MAX_TOKEN_BYTES = 4096
MAX_MESSAGE_BYTES = 4096

OK, INVALID_ARGUMENT, UNAUTHENTICATED, INTERNAL, UNAVAILABLE = 0, 1, 2, 3, 4
STATUS_NAMES = dict(enumerate(("OK", "INVALID_ARGUMENT", "UNAUTHENTICATED", "INTERNAL", "UNAVAILABLE")))  # as gRPC's
DTYPES = (np.dtype("<f4"), np.dtype("<f2"))

_REQUEST_HEAD = struct.Struct("<4sII")  # magic, flags, token length
_COUNT = struct.Struct("<Q")
REPLY_HEAD = struct.Struct("<4sIIQII")  # magic, status, dtype, rows, dim, message length


def encode_request(ids: np.ndarray, *, float16: bool, token: str | None) -> list[bytes | memoryview]:
    """The request frame for ``ids`` (int64), as pieces for one ``sendmsg``/``sendall`` each."""
    secret = (token or "").encode()
    if len(secret) > MAX_TOKEN_BYTES:
        raise ValueError(f"token of {len(secret)} bytes exceeds {MAX_TOKEN_BYTES}")
    ids = np.ascontiguousarray(ids, dtype="<i8")
    head = _REQUEST_HEAD.pack(REQUEST_MAGIC, FLAG_FLOAT16 if float16 else 0, len(secret)) + secret
    return [head + _COUNT.pack(ids.size), ids.data.cast("B")]


def parse_request_head(head: bytes) -> tuple[int, int]:
    """``(flags, token length)`` of a request's first 12 bytes.

    Raises:
        DecodeError: not a bulk request (wrong magic: another protocol, e.g. TLS to a plaintext port),
            unknown flags, or a token length over the limit.
    """
    magic, flags, token_len = _REQUEST_HEAD.unpack(head)
    if magic != REQUEST_MAGIC:
        raise DecodeError(f"not a bulk gather request (starts with {magic!r}, expected {REQUEST_MAGIC!r})")
    if flags & ~FLAG_FLOAT16:
        raise DecodeError(f"bulk request flags {flags:#x} name unknown bits")
    if token_len > MAX_TOKEN_BYTES:
        raise DecodeError(f"bulk request token of {token_len} bytes exceeds {MAX_TOKEN_BYTES}")
    return flags, token_len


def parse_count(data: bytes, limit: int) -> int:
    """The request's id count, refused above ``limit`` before anything is allocated for it."""
    (count,) = _COUNT.unpack(data)
    if count > limit:
        raise DecodeError(f"bulk request of {count} ids exceeds this server's limit of {limit} per request")
    return count


def encode_reply_head(status: int, dtype: np.dtype, rows: int, dim: int, message: str = "") -> bytes:
    text = message.encode()[:MAX_MESSAGE_BYTES]
    return REPLY_HEAD.pack(REPLY_MAGIC, status, DTYPES.index(np.dtype(dtype).newbyteorder("<")), rows, dim,
                           len(text)) + text


def parse_reply_head(head: bytes) -> tuple[int, np.dtype, int, int, int]:
    """``(status, dtype, rows, dim, message length)`` of a reply's fixed header.

    Raises:
        DecodeError: wrong magic, unknown status or dtype, an oversized message.
    """
    magic, status, dtype, rows, dim, length = REPLY_HEAD.unpack(head)
    if magic != REPLY_MAGIC:
        raise DecodeError(f"not a bulk gather reply (starts with {magic!r}, expected {REPLY_MAGIC!r})")
    if status not in STATUS_NAMES:
        raise DecodeError(f"bulk reply status {status} is unknown")
    if dtype >= len(DTYPES):
        raise DecodeError(f"bulk reply dtype code {dtype} is unknown")
    if length > MAX_MESSAGE_BYTES:
        raise DecodeError(f"bulk reply message of {length} bytes exceeds {MAX_MESSAGE_BYTES}")
    return status, DTYPES[dtype], rows, dim, length
