"""Garbage in, INVALID_ARGUMENT out: random and mutated payloads against every method of a real server.

The payloads go through a raw channel (bytes in, bytes out: no client-side
checks in the way). Every answer must be OK (the payload happened to be a
valid request) or INVALID_ARGUMENT with one short line; the server must still
serve afterwards, and its log must hold a handful of lines, no traceback.
Each runs against a plaintext server and against one with TLS and a token
(the channel carries the token, so the payloads reach the handlers); without
the token every payload is UNAUTHENTICATED, never parsed.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass

import grpc
import numpy as np
import pytest

from saintpipe.core.grpc_status import MAX_DETAILS
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.feature_shard.security import ServerSecurity
from saintpipe.services.feature_shard.server import create_server, stop_server
from saintpipe.services.feature_shard.wire import SERVICE_NAME, decode_chunk, encode_ids
from tests.support.tls import make_pki

pytestmark = pytest.mark.faults  # part of the fault suite (docs/how-to/faults.md)

SHARD = 1
PER_METHOD = 300
SEED = 20240601
ALLOWED = (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT)
TOKEN = "fuzz-token-0123456789abcdef"
_OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


@dataclass(frozen=True)
class Target:
    """A server under test: its address and how to open channels to it."""

    address: str
    ca: bytes | None  # TLS: the CA of its certificate; None: plaintext
    token: str | None  # the token it requires

    def channel(self, with_token: bool = True) -> grpc.Channel:
        """A raw channel; over TLS it carries the token (if any, and ``with_token``) on every call."""
        if self.ca is None:
            return grpc.insecure_channel(self.address, options=_OPTIONS)
        credentials = grpc.ssl_channel_credentials(self.ca)
        if self.token and with_token:
            credentials = grpc.composite_channel_credentials(
                credentials, grpc.access_token_call_credentials(self.token)
            )
        return grpc.secure_channel(self.address, credentials, options=_OPTIONS)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("fuzz-pki"))


@pytest.fixture(params=["plaintext", "tls+token"])
def server(request, feature_dataset, caplog, pki):
    caplog.set_level(logging.INFO)
    secure = request.param == "tls+token"
    security = ServerSecurity(tls_cert=pki.server_cert, tls_key=pki.server_key, token=TOKEN) if secure else None
    server, port = create_server(feature_dataset, SHARD, log_interval_s=10.0, security=security)
    caplog.clear()  # from here on, only what the payloads cause
    yield Target(f"127.0.0.1:{port}", pki.ca_cert.read_bytes() if secure else None, TOKEN if secure else None)
    stop_server(server, grace=1.0)


def _valid_requests(start: int, stop: int) -> dict[str, list[bytes]]:
    region = "saintpipe-features-0-1-feedface"  # well formed, never created: INVALID_ARGUMENT on use
    ids = encode_ids(np.array([start, stop - 1, start + 3, start]))
    gathers = [
        pb.GatherRequest(ids=ids),
        pb.GatherRequest(ids=ids, transfer_dtype="float16"),
        pb.GatherRequest(
            ids=ids, shared_memory=pb.SharedMemoryTarget(region=region, offset=64, capacity=1 << 20)
        ),
    ]
    return {
        "Gather": [m.SerializeToString() for m in gathers],
        "GatherUnary": [m.SerializeToString() for m in gathers],
        "Info": [b"", pb.InfoRequest().SerializeToString()],
        "ProbeSharedMemory": [pb.SharedMemoryProbe(region=region, length=16).SerializeToString()],
    }


def _crafted(start: int, stop: int) -> list[bytes]:
    """Hand-made bad messages: wrong lengths and dtypes, absurd sizes, bad names, broken framing."""
    out_of_range = np.arange(start, start + 1_000_000)
    out_of_range[-1] = stop + 5
    return [
        pb.GatherRequest(ids=b"\x01\x02\x03").SerializeToString(),  # not a whole number of int64
        pb.GatherRequest(ids=encode_ids(np.array([-1, 2**62]))).SerializeToString(),
        pb.GatherRequest(ids=encode_ids(out_of_range)).SerializeToString(),  # 8 MB, the last id bad
        pb.GatherRequest(ids=b"", transfer_dtype="int8").SerializeToString(),
        pb.GatherRequest(ids=b"", transfer_dtype="f" * 100_000).SerializeToString(),
        b"\x12\x02\xff\xfe",  # transfer_dtype not UTF-8
        b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f",  # ids claims 2**63 bytes
        b"\x0a" + b"\xff" * 12,  # a varint of 12 bytes
        b"\x0b" * 300 + b"\x0c" * 300,  # groups nested past any limit
        b"\x00\x00\x00",  # field number 0
        b"\x0f",  # wire type 7
        pb.GatherRequest(
            ids=encode_ids(np.array([start])),
            shared_memory=pb.SharedMemoryTarget(region="../../etc/passwd", offset=0, capacity=1 << 30),
        ).SerializeToString(),
        pb.GatherRequest(
            ids=encode_ids(np.array([start])),
            shared_memory=pb.SharedMemoryTarget(region="saintpipe-features-" + "x" * 100_000),
        ).SerializeToString(),
        pb.GatherRequest(
            ids=encode_ids(np.array([start])),
            shared_memory=pb.SharedMemoryTarget(
                region="saintpipe-features-0-1-abc", offset=2**64 - 1, capacity=2**64 - 1
            ),
        ).SerializeToString(),
        pb.GatherRequest(
            ids=encode_ids(np.array([start])),
            shared_memory=pb.SharedMemoryTarget(region="/dev/zero", capacity=0),
        ).SerializeToString(),
        pb.SharedMemoryProbe(region="saintpipe-features-x", length=0).SerializeToString(),
        pb.SharedMemoryProbe(region="saintpipe-features-x", length=2**32 - 1).SerializeToString(),
        pb.SharedMemoryProbe(region="saintpipe-features-/x", length=16).SerializeToString(),
        pb.SharedMemoryProbe(region="\x00" * 1000, length=16).SerializeToString(),
    ]


def _mutate(rng: random.Random, seed: bytes) -> bytes:
    data = bytearray(seed)
    kind = rng.randrange(5)
    if kind == 0 or not data:  # random bytes
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 80)))
    if kind == 1:  # flip a few bytes
        for _ in range(rng.randrange(1, 5)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
    elif kind == 2:  # truncate
        del data[rng.randrange(len(data)) :]
    elif kind == 3:  # insert random bytes
        at = rng.randrange(len(data) + 1)
        data[at:at] = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 12)))
    else:  # duplicate a slice (repeated fields, overlapping lengths)
        a = rng.randrange(len(data))
        b = rng.randrange(a, len(data) + 1)
        data[b:b] = data[a:b]
    return bytes(data)


def _call(channel: grpc.Channel, method: str, payload: bytes) -> tuple[grpc.StatusCode, str]:
    path = f"/{SERVICE_NAME}/{method}"
    try:
        if method == "Gather":
            list(
                channel.unary_stream(path, request_serializer=None, response_deserializer=None)(
                    payload, timeout=30
                )
            )
        else:
            channel.unary_unary(path, request_serializer=None, response_deserializer=None)(
                payload, timeout=30
            )
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def test_every_method_answers_garbage_with_invalid_argument_and_logs_a_handful_of_lines(
    server, feature_dataset, full_matrix, caplog
):

    from saintpipe.services.dataset.store import open_dataset

    start, stop = open_dataset(feature_dataset).manifest.shards[SHARD]
    rng = random.Random(SEED)
    valid = _valid_requests(start, stop)
    crafted = _crafted(start, stop)
    seen: dict[str, dict[str, int]] = {}
    began = time.monotonic()
    with server.channel() as channel:
        for method, seeds in valid.items():
            payloads = crafted + [_mutate(rng, rng.choice(seeds)) for _ in range(PER_METHOD)]
            counts = seen.setdefault(method, {})
            for payload in payloads:
                code, details = _call(channel, method, payload)
                assert code in ALLOWED, f"{method} answered {code.name} ({details!r}) to {payload[:60]!r}"
                if code != grpc.StatusCode.OK:
                    assert details and "\n" not in details and len(details) <= MAX_DETAILS, details
                    assert "internal error" not in details and "Traceback" not in details
                counts[code.name] = counts.get(code.name, 0) + 1
        # The server still serves.
        ids = np.array([stop - 1, start, start + 7])
        answer = channel.unary_unary(
            f"/{SERVICE_NAME}/GatherUnary", request_serializer=None, response_deserializer=None
        )(pb.GatherRequest(ids=encode_ids(ids)).SerializeToString(), timeout=10)
        np.testing.assert_array_equal(decode_chunk(answer)[1], full_matrix[ids])
    elapsed = time.monotonic() - began
    for method, counts in seen.items():  # the fuzz did reach the error paths of every method
        assert counts.get("INVALID_ARGUMENT", 0) >= 20, (method, counts)
    # One line per peer host per 10 s (the run took ~a few seconds): a handful at most, none with a traceback.
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert 1 <= len(lines) <= 2 + int(elapsed // 10), [r.getMessage() for r in lines]
    assert all(r.exc_info is None and "Traceback" not in r.getMessage() for r in lines)
    assert "INVALID_ARGUMENT" in lines[0].getMessage() and "127.0.0.1" in lines[0].getMessage()
    assert all("grpc" not in r.name for r in caplog.records), "gRPC logged something itself"


def test_the_next_line_counts_the_calls_left_out(feature_dataset, caplog):
    caplog.set_level(logging.INFO)
    server, port = create_server(feature_dataset, SHARD, log_interval_s=0.5)
    try:
        caplog.clear()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            for _ in range(40):
                assert _call(channel, "GatherUnary", b"\x0a\x05ab")[0] == grpc.StatusCode.INVALID_ARGUMENT
            time.sleep(0.6)
            assert _call(channel, "Info", b"\x00")[0] == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        stop_server(server, grace=1.0)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 2, lines
    assert "GatherUnary" in lines[0] and "GatherRequest.ids: claims 5 bytes" in lines[0]
    assert "Info" in lines[1] and lines[1].endswith("(39 more from this host since the last line)")


def test_the_health_service_beside_it_answers_garbage_the_same_way(server, caplog):
    # Its handlers deserialize with the generated classes: the status interceptor turns a refusal into
    # INVALID_ARGUMENT instead of gRPC's INTERNAL and traceback.
    from grpc_health.v1 import health_pb2

    rng = random.Random(SEED)
    seed = health_pb2.HealthCheckRequest(service=SERVICE_NAME).SerializeToString()
    codes: dict[str, int] = {}
    with server.channel(with_token=False) as channel:  # health checks need no token
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=None, response_deserializer=None
        )
        for payload in [b"\x0a\x05ab", b"\x0a\x02\xff\xfe"] + [_mutate(rng, seed) for _ in range(200)]:
            try:
                check(payload, timeout=10)
                code = grpc.StatusCode.OK
            except grpc.RpcError as exc:
                code = exc.code()
                assert "\n" not in (exc.details() or "")
            # NOT_FOUND: a well-formed request naming a service this server does not have.
            assert code in (*ALLOWED, grpc.StatusCode.NOT_FOUND), code
            codes[code.name] = codes.get(code.name, 0) + 1
        status = health_pb2.HealthCheckResponse.FromString(check(seed, timeout=10)).status
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert codes.get("INVALID_ARGUMENT", 0) >= 20, codes
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert 1 <= len(lines) <= 2 and all(r.exc_info is None for r in lines), [r.getMessage() for r in lines]


def test_without_the_token_every_payload_is_unauthenticated_and_never_parsed(feature_dataset, pki, caplog):
    caplog.set_level(logging.INFO)
    security = ServerSecurity(tls_cert=pki.server_cert, tls_key=pki.server_key, token=TOKEN)
    server, port = create_server(feature_dataset, SHARD, log_interval_s=10.0, security=security)
    target = Target(f"127.0.0.1:{port}", pki.ca_cert.read_bytes(), TOKEN)
    from saintpipe.services.dataset.store import open_dataset

    start, stop = open_dataset(feature_dataset).manifest.shards[SHARD]
    rng = random.Random(SEED)
    try:
        caplog.clear()
        with target.channel(with_token=False) as channel:
            for method, seeds in _valid_requests(start, stop).items():
                for payload in _crafted(start, stop)[:5] + [_mutate(rng, rng.choice(seeds)) for _ in range(30)]:
                    code, details = _call(channel, method, payload)
                    assert (code, details) == (grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token"), method
    finally:
        stop_server(server, grace=1.0)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert 1 <= len(lines) <= 2 and all("UNAUTHENTICATED: missing or wrong token" in line for line in lines), lines
    assert TOKEN not in caplog.text
