"""encode_subgraph_into: the bytes of encode_subgraph written straight into a caller's buffer.

Both paths are exercised: the compiled one (frame, allocate, then one kernel
that hashes, checks and copies each array) and the Python fallback
(``fused.AVAILABLE`` False, or the kernel answering FALLBACK). The reference
bytes always come from the Python encoder.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.pool import codec
from saintpipe.services.pool.codec import fused
from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph, encode_subgraph_into
from saintpipe.services.pool.synthetic import random_subgraph

FILL = 0xAB  # what the buffer holds beyond the message: must stay untouched


class Allocator:
    """An ``allocate`` that records its calls and hands out a buffer ``extra`` bytes longer than asked."""

    def __init__(self, extra: int = 64) -> None:
        self.extra = extra
        self.calls: list[int] = []
        self.buf: np.ndarray | None = None

    def __call__(self, size: int) -> np.ndarray:
        self.calls.append(size)
        self.buf = np.full(size + self.extra, FILL, dtype=np.uint8)
        return self.buf


@pytest.fixture(params=["compiled", "python"])
def path(request, monkeypatch):
    if request.param == "compiled":
        assert fused.AVAILABLE, "xxhash's C functions should be callable from kernels with the pinned wheel"
    else:
        monkeypatch.setattr(fused, "AVAILABLE", False)
    return request.param


def python_bytes(sg, monkeypatch, *, validate: bool = True) -> bytes:
    """encode_subgraph through the Python encoder (the reference)."""
    with monkeypatch.context() as m:
        m.setattr(fused, "AVAILABLE", False)
        return encode_subgraph(sg, validate=validate)


def written(sg, *, validate: bool = True, extra: int = 64) -> bytes:
    """encode_subgraph_into a fresh buffer; checks the call contract and returns the message's bytes."""
    allocate = Allocator(extra)
    nbytes = encode_subgraph_into(sg, allocate, validate=validate)
    assert allocate.calls == [nbytes]  # once, for exactly the message (its checksum is not 0 here)
    assert (allocate.buf[nbytes:] == FILL).all(), "wrote past the message"
    return bytes(allocate.buf[:nbytes])


CASES = [
    random_subgraph(0, 0),
    random_subgraph(0, 0, seed=9, job_id="only-metadata", worker=1, sequence=1),
    random_subgraph(1, 0, seed=1, job_id="ü-job", worker=-1, sequence=2**63 - 1),
    random_subgraph(40, 0, seed=2, job_id="no-edges", worker=2**40),
    random_subgraph(5, 3, seed=3, job_id="x" * 127, worker=-(2**63), sequence=-(2**63)),
    random_subgraph(6, 9, seed=4, job_id="y" * 128, worker=2**63 - 1, sequence=128),
    random_subgraph(200, 3000, seed=5, job_id="z" * 20000),
    random_subgraph(3000, 60000, seed=6, job_id="j"),
    dataclasses.replace(random_subgraph(7, 9, seed=7), seed=2**64 - 1),
    dataclasses.replace(random_subgraph(7, 9, seed=8), seed=0, job_id=""),
]


@pytest.mark.parametrize("sg", CASES, ids=range(len(CASES)))
def test_writes_the_bytes_of_encode_subgraph(sg, path, monkeypatch):
    data = written(sg)
    assert data == python_bytes(sg, monkeypatch)
    back = decode_subgraph(data)
    assert back.equals(sg)
    assert (back.job_id, back.worker, back.sequence, back.seed) == (sg.job_id, sg.worker, sg.sequence, sg.seed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 60),
    e=st.integers(0, 300),
    seed=st.integers(0, 2**64 - 1),
    job_id=st.text(max_size=200),
    worker=st.integers(-(2**63), 2**63 - 1),
    sequence=st.integers(-(2**63), 2**63 - 1),
)
def test_random_subgraphs_match_the_python_encoder(n, e, seed, job_id, worker, sequence):
    sg = random_subgraph(n, e, seed=seed % 2**32, job_id=job_id, worker=worker, sequence=sequence)
    sg = dataclasses.replace(sg, seed=seed)
    assert fused.AVAILABLE
    fast = written(sg)
    fused.AVAILABLE = False  # no monkeypatch fixture under hypothesis: restored below
    try:
        assert written(sg) == fast == encode_subgraph(sg)
    finally:
        fused.AVAILABLE = True


def test_an_exact_size_buffer_and_a_shared_one_are_enough(path):
    sg = random_subgraph(50, 400, seed=11, job_id="exact")
    want = encode_subgraph(sg)
    exact = Allocator(extra=0)
    assert encode_subgraph_into(sg, exact) == len(want)
    assert exact.buf.tobytes() == want
    arena = np.zeros(3 * len(want), dtype=np.uint8)  # e.g. a slot of a shared-memory file
    nbytes = encode_subgraph_into(sg, lambda size: arena[len(want) : len(want) + size])
    assert arena[len(want) : len(want) + nbytes].tobytes() == want
    assert not arena[: len(want)].any() and not arena[len(want) + nbytes :].any()


def test_kernel_fallback_writes_the_python_bytes_into_the_buffer_already_allocated(monkeypatch):
    sg = random_subgraph(30, 200, seed=12, job_id="fallback", worker=4, sequence=5)
    monkeypatch.setattr(fused, "fill", lambda *args: fused.FALLBACK)  # e.g. no hash state could be allocated
    assert written(sg) == python_bytes(sg, monkeypatch)


def test_unchecked_invalid_subgraphs_are_written_as_the_python_encoder_writes_them(path, monkeypatch):
    sg = random_subgraph(6, 10, seed=13, job_id="broken")
    for broken in (
        dataclasses.replace(sg, indices=sg.indices[::-1].copy()),
        dataclasses.replace(sg, loss_weights=sg.loss_weights[:-1].copy()),  # lengths disagree
        dataclasses.replace(sg, edge_weights=np.full(sg.indices.size, np.nan, dtype=np.float32)),
    ):
        assert written(broken, validate=False) == python_bytes(broken, monkeypatch, validate=False)


@pytest.mark.parametrize(
    "field, change",
    [
        ("indices", lambda sg: {"indices": sg.indices[::-1].copy()}),
        ("node_ids", lambda sg: {"node_ids": sg.node_ids[::-1].copy()}),
        ("indptr", lambda sg: {"indptr": sg.indptr[:-1].copy()}),
        ("loss_weights", lambda sg: {"loss_weights": np.full(sg.node_ids.size, np.inf, dtype=np.float32)}),
        ("edge_weights_t", lambda sg: {"edge_weights_t": sg.edge_weights_t[:-1].copy()}),
        ("edge_weights", lambda sg: {"edge_weights": sg.edge_weights.astype(np.float64)}),
        ("worker", lambda sg: {"worker": 2**63}),
        ("seed", lambda sg: {"seed": -1}),
        ("job_id", lambda sg: {"job_id": b"bytes"}),
    ],
)
def test_invalid_subgraphs_raise_the_errors_of_encode_subgraph(field, change, path):
    sg = random_subgraph(6, 10, seed=14)
    broken = dataclasses.replace(sg, **change(sg))
    with pytest.raises(InvalidArgument, match=field) as parts_error:
        codec.encode_subgraph_parts(broken)
    with pytest.raises(InvalidArgument, match=field) as into_error:
        encode_subgraph_into(broken, Allocator())
    assert str(into_error.value) == str(parts_error.value)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda size: np.zeros(size - 1, dtype=np.uint8), r"encode buffer: \d+ bytes, the message needs \d+"),
        (lambda size: np.zeros(size, dtype=np.int8), "encode buffer: dtype int8, expected uint8"),
        (lambda size: np.zeros(size, dtype=np.float64), "encode buffer: dtype float64, expected uint8"),
        (lambda size: np.zeros(2 * size, dtype=np.uint8)[::2], "encode buffer: not C-contiguous"),
        (lambda size: np.frombuffer(bytes(size), dtype=np.uint8), "encode buffer: read-only"),
        (lambda size: bytearray(size), "encode buffer: expected a numpy uint8 array, got bytearray"),
    ],
    ids=["too-small", "int8", "float64", "strided", "read-only", "bytearray"],
)
def test_unfit_buffers_raise_invalid_argument(make, message, path):
    with pytest.raises(InvalidArgument, match=message):
        encode_subgraph_into(random_subgraph(20, 80, seed=15, job_id="buf"), make)
