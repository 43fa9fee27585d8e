"""The subgraph codec: exact round trips, agreement with the generated protobuf classes, clear errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from saintpipe.core import protowire as pw
from saintpipe.core.errors import DecodeError, InvalidArgument
from saintpipe.protos import subgraph_pb2
from saintpipe.services.pool.codec import ARRAYS, FORMAT_VERSION, decode_subgraph, encode_subgraph
from saintpipe.services.pool.codec import schema
from saintpipe.services.pool.synthetic import random_subgraph
from saintpipe.core.subgraph import Subgraph


def tiny() -> Subgraph:
    """Three nodes, a path 0-1-2 stored both ways."""
    return Subgraph(
        node_ids=np.array([4, 9, 30], dtype=np.int64),
        indptr=np.array([0, 1, 3, 4], dtype=np.int64),
        indices=np.array([1, 0, 2, 1], dtype=np.int32),
        edge_weights=np.array([0.5, 1.0, 0.25, 2.0], dtype=np.float32),
        edge_weights_t=np.array([1.0, 0.5, 2.0, 0.25], dtype=np.float32),
        loss_weights=np.array([1.0, 2.0, 3.0], dtype=np.float32),
        job_id="job-1",
        worker=3,
        sequence=17,
        seed=12345,
    )


def build_message(
    arrays: dict[str, np.ndarray],
    *,
    version: int = FORMAT_VERSION,
    job_id: str = "j",
    worker: int = 0,
    sequence: int = 0,
    seed: int = 0,
    dtypes: dict | None = None,
    shapes: dict | None = None,
    checksum: int | None = None,
) -> bytes:
    """A message built with the generated classes, valid checksum unless given: for malformation tests."""
    msg = subgraph_pb2.Subgraph(
        format_version=version, job_id=job_id, worker=worker, sequence=sequence, seed=seed
    )
    for name, arr in arrays.items():
        field = getattr(msg, name)
        field.dtype = (dtypes or {}).get(name, arr.dtype.str)
        field.shape.extend((shapes or {}).get(name, arr.shape))
        field.data = arr.tobytes()
    if checksum is None:
        checksum = (
            schema.checksum(FORMAT_VERSION, (job_id, worker, sequence, seed), arrays) if len(arrays) == 6 else 1
        )
    msg.checksum = checksum
    return msg.SerializeToString()


def arrays_of(sg: Subgraph) -> dict[str, np.ndarray]:
    return {name: getattr(sg, name) for name in ARRAYS}


@pytest.mark.parametrize(
    "sg",
    [
        tiny(),
        random_subgraph(0, 0),
        random_subgraph(1, 0, seed=1),
        random_subgraph(50, 400, seed=2, job_id="x" * 128, worker=-5, sequence=2**63 - 1),
        dataclasses.replace(random_subgraph(20, 50, seed=3), seed=2**64 - 1, job_id="jöb"),
    ],
    ids=["tiny", "empty", "one-node", "medium", "extremes"],
)
def test_round_trip_is_exact(sg):
    data = encode_subgraph(sg)
    back = decode_subgraph(data)
    assert back.equals(sg)
    for name in ARRAYS:
        assert getattr(back, name).dtype == ARRAYS[name][1]


def test_large_subgraph_round_trips_exactly():
    sg = random_subgraph(8000, 203_000, seed=7, job_id="big", worker=2, sequence=99)
    assert sg.num_nodes == 8000 and sg.num_edges >= 200_000
    data = encode_subgraph(sg)
    back = decode_subgraph(data)
    assert back.equals(sg)
    assert len(data) < sg.nbytes + 1024  # raw bytes plus a small header: no per-item encoding


def test_decoded_arrays_are_aligned_read_only_views_of_the_message():
    data = encode_subgraph(random_subgraph(300, 2000, seed=4))
    back = decode_subgraph(data)
    for name in ARRAYS:
        arr = getattr(back, name)
        assert arr.base is data, f"{name} is a copy"
        assert arr.flags.aligned and not arr.flags.writeable
    with pytest.raises(ValueError):
        back.indices[0] = 1


def test_bytes_are_what_the_generated_classes_serialize():
    for sg in (tiny(), random_subgraph(0, 0), random_subgraph(333, 4001, seed=5, worker=-1)):
        data = encode_subgraph(sg)
        msg = subgraph_pb2.Subgraph.FromString(data)
        assert msg.SerializeToString() == data
        assert msg.format_version == FORMAT_VERSION
        assert (msg.job_id, msg.worker, msg.sequence, msg.seed) == (
            sg.job_id,
            sg.worker,
            sg.sequence,
            sg.seed,
        )
        for name in ARRAYS:
            field = getattr(msg, name)
            assert field.dtype == ARRAYS[name][1].str and list(field.shape) == [getattr(sg, name).size]
            assert field.data == getattr(sg, name).tobytes()
            assert set(field.padding) <= {0}


def test_decoder_reads_messages_from_other_protobuf_writers():
    # No padding, so the arrays are not aligned: the decoder copies them once.
    sg = tiny()
    back = decode_subgraph(
        build_message(arrays_of(sg), job_id=sg.job_id, worker=sg.worker, sequence=sg.sequence, seed=sg.seed)
    )
    assert back.equals(sg)


def test_encoder_converts_safe_dtypes_and_refuses_lossy_ones():
    sg = tiny()
    widened = dataclasses.replace(
        sg,
        node_ids=sg.node_ids.astype(np.int32),
        indptr=sg.indptr.astype(np.int32),
        indices=sg.indices.astype(np.int16),
    )
    assert decode_subgraph(encode_subgraph(widened)).equals(sg)
    with pytest.raises(InvalidArgument, match="edge_weights: dtype float64"):
        encode_subgraph(dataclasses.replace(sg, edge_weights=sg.edge_weights.astype(np.float64)))
    with pytest.raises(InvalidArgument, match="indices: dtype int64"):
        encode_subgraph(dataclasses.replace(sg, indices=sg.indices.astype(np.int64)))
    with pytest.raises(InvalidArgument, match="loss_weights: expected a 1-D array"):
        encode_subgraph(dataclasses.replace(sg, loss_weights=sg.loss_weights.reshape(3, 1)))
    with pytest.raises(InvalidArgument, match="seed"):
        encode_subgraph(dataclasses.replace(sg, seed=-1))
    with pytest.raises(InvalidArgument, match="worker"):
        encode_subgraph(dataclasses.replace(sg, worker=2**63))


def test_encoder_refuses_a_broken_subgraph_naming_the_field():
    sg = tiny()
    with pytest.raises(InvalidArgument, match="indices: position 1 .* out of range"):
        encode_subgraph(dataclasses.replace(sg, indices=np.array([1, 7, 2, 1], dtype=np.int32)))
    # Without validation it encodes, and the decoder catches it.
    data = encode_subgraph(
        dataclasses.replace(sg, indices=np.array([1, 7, 2, 1], dtype=np.int32)), validate=False
    )
    with pytest.raises(DecodeError, match="indices"):
        decode_subgraph(data)


def _with(sg: Subgraph, **arrays) -> dict[str, np.ndarray]:
    out = arrays_of(sg)
    out.update({k: np.asarray(v, dtype=ARRAYS[k][1]) for k, v in arrays.items()})
    return out


MALFORMED = {
    "wrong version": (lambda sg: build_message(arrays_of(sg), version=2), "format_version: got 2"),
    "no version": (lambda sg: build_message(arrays_of(sg), version=0), "format_version: got 0"),
    "dtype mismatch": (
        lambda sg: build_message(arrays_of(sg), dtypes={"indices": "<i8"}),
        "indices.dtype: got '<i8', expected '<i4'",
    ),
    "big-endian dtype": (
        lambda sg: build_message(arrays_of(sg), dtypes={"edge_weights": ">f4"}),
        "edge_weights.dtype",
    ),
    "length mismatch": (
        lambda sg: build_message(arrays_of(sg), shapes={"edge_weights_t": (5,)}),
        "edge_weights_t.data: shape \\[5\\] of <f4 needs 20 bytes, got 16",
    ),
    "two-dimensional": (
        lambda sg: build_message(arrays_of(sg), shapes={"loss_weights": (3, 1)}),
        "loss_weights.shape: expected one non-negative length",
    ),
    "indptr not monotone": (
        lambda sg: build_message(_with(sg, indptr=[0, 3, 1, 4])),
        "indptr: position 2 .* not monotone",
    ),
    "indptr wrong length": (
        lambda sg: build_message(_with(sg, indptr=[0, 1, 4])),
        "indptr: length 3, expected 4",
    ),
    "indptr wrong end": (lambda sg: build_message(_with(sg, indptr=[0, 1, 2, 3])), "indptr: position 3"),
    "index out of range": (
        lambda sg: build_message(_with(sg, indices=[1, 0, 3, 1])),
        "indices: position 2 \\(value 3\\) out of range",
    ),
    "negative index": (lambda sg: build_message(_with(sg, indices=[1, -1, 2, 1])), "indices: position 1"),
    "row not sorted": (
        lambda sg: build_message(_with(sg, indices=[1, 2, 0, 1])),
        "indices: position 2 .* not strictly ascending within its row",
    ),
    "node ids not sorted": (
        lambda sg: build_message(_with(sg, node_ids=[4, 30, 9])),
        "node_ids: position 2 .* not strictly ascending",
    ),
    "negative node id": (lambda sg: build_message(_with(sg, node_ids=[-4, 9, 30])), "node_ids: position 0"),
    "weights length": (
        lambda sg: build_message(_with(sg, edge_weights=[1, 2, 3])),
        "edge_weights: length 3, expected 4",
    ),
    "loss weights length": (
        lambda sg: build_message(_with(sg, loss_weights=[1, 2])),
        "loss_weights: length 2, expected 3",
    ),
    "nan weight": (
        lambda sg: build_message(_with(sg, edge_weights_t=[1, np.nan, 1, 1])),
        "edge_weights_t: position 1 .* not finite",
    ),
    "inf loss weight": (
        lambda sg: build_message(_with(sg, loss_weights=[1, 1, np.inf])),
        "loss_weights: position 2",
    ),
    "missing array": (
        lambda sg: build_message({k: v for k, v in arrays_of(sg).items() if k != "indptr"}),
        "indptr: missing",
    ),
    "bad checksum": (lambda sg: build_message(arrays_of(sg), checksum=1), "checksum"),
    "not protobuf": (lambda sg: b"\xff\xff\xff\xff", "subgraph message"),
    "truncated": (lambda sg: encode_subgraph(sg)[:-20], "subgraph"),
    "empty": (lambda sg: b"", "format_version: got 0"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_messages_raise_decode_error_naming_the_field(case):
    make, message = MALFORMED[case]
    with pytest.raises(DecodeError, match=message):
        decode_subgraph(make(tiny()))


def test_repeated_and_mistyped_fields_are_refused():
    data = encode_subgraph(tiny())
    with pytest.raises(DecodeError, match="format_version: appears more than once"):
        decode_subgraph(data + b"\x08\x01")
    with pytest.raises(DecodeError, match="worker: wire type 2"):
        decode_subgraph(data + b"\x1a\x00")


def test_unknown_fields_are_skipped():
    data = encode_subgraph(tiny())
    # Field 99 as a varint and as bytes: a newer writer's additions.
    extra = b"\x98\x06\x05" + b"\x9a\x06\x03abc"
    assert decode_subgraph(data + extra).equals(tiny())


def test_broken_framing_names_the_field():
    data = encode_subgraph(tiny())
    fields = {n: (at, size) for n, _, at, size in pw.iter_fields(data, 0, len(data), "subgraph")}
    at, size = fields[ARRAYS["indptr"][0]]
    with pytest.raises(DecodeError, match=rf"subgraph indptr: claims {size} bytes, only {size - 1} remain"):
        decode_subgraph(data[: at + size - 1])
    with pytest.raises(DecodeError, match="subgraph worker: truncated varint"):
        decode_subgraph(data + b"\x18\x80")
    with pytest.raises(DecodeError, match="subgraph checksum: truncated"):
        decode_subgraph(data + b"\x61\0\0")
    # Inside an Array message: its dtype field claims more than the array holds.
    start, length = fields[ARRAYS["node_ids"][0]]
    array = data[start : start + length]
    assert array[0] == 0x0A  # Array.dtype, length-delimited, first
    mangled = data[:start] + b"\x0a\x7f" + data[start + 2 :]
    with pytest.raises(DecodeError, match=r"subgraph node_ids.dtype: claims 127 bytes"):
        decode_subgraph(mangled)
