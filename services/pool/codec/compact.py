"""SubgraphNodes <-> bytes: format_version 2 of the ``saintpipe.protos.Subgraph`` message, the compact form.

A sampler in the ``nodes`` wire mode sends only the node set of its subgraph
and an :class:`~saintpipe.core.subgraph.Induction` (which graph, which
normalization, which training nodes); the trainer induces the CSR and computes
the weights again from its own copy of the topology
(:mod:`saintpipe.minibatch.expand`). Ids travel sorted, as the first id and the
gaps between neighbours in the narrowest unsigned width that holds the largest
gap: a random-walk subgraph of ~7,000 nodes on a Kronecker graph of 262,144
nodes takes 2 bytes a node (about 14 KB, with the rest of the message) where
the whole subgraph takes 1.6 MB (docs/explanation/pool.md has the figures).

The message is small, so it is built and parsed with the generated classes
(the hand framing of :mod:`saintpipe.services.pool.codec` exists to spare
copies of megabytes). The decoder trusts nothing: a malformed message, a
checksum mismatch, unsorted or out-of-range ids, or sizes that disagree raise
:class:`~saintpipe.core.errors.DecodeError` naming the field, before anything
proportional to a claimed size is allocated.

:func:`decode_entry` reads either version, which is what the pool's consumers call.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError as ProtobufDecodeError

from saintpipe.core import protowire as pw
from saintpipe.core.errors import DecodeError, InvalidArgument
from saintpipe.core.subgraph import ALL_TRAIN_NODES, Induction, Subgraph, SubgraphNodes
from saintpipe.protos import subgraph_pb2
from saintpipe.services.pool.codec.decoder import decode_owned
from saintpipe.services.pool.codec.schema import ARRAYS, COMPACT_VERSION, INT64, UINT64, checked_meta, checksum_nodes

__all__ = ["MAX_GRAPH_NODES", "decode_entry", "decode_nodes", "encode_nodes", "format_version"]

# Datasets store column ids as int32: no graph has more nodes. Bounds every size a message may claim.
MAX_GRAPH_NODES = 2**31
_MAX_GRAPH_EDGES = 2**62
_GAP_DTYPES: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}
# A normalization key names a folder under DATASET/norm/: no separators, no "." or "..".
_NORM_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_TRAIN_DIGEST = re.compile(r"[0-9a-f]{16}")


def encode_nodes(sg: SubgraphNodes) -> bytes:
    """Serialize a node set into the bytes of a version-2 ``saintpipe.protos.Subgraph`` message.

    Raises:
        InvalidArgument: ids not strictly ascending, negative or beyond the graph, or an induction
            or identifier out of range, naming the field.
    """
    if not isinstance(sg, SubgraphNodes):
        raise InvalidArgument(f"encode_nodes: expected SubgraphNodes, got {type(sg).__name__}")
    ind = _checked_induction(sg.induction, InvalidArgument)
    meta = checked_meta(sg.job_id, sg.worker, sg.sequence, sg.seed)
    ids = np.asarray(sg.node_ids)
    if ids.ndim != 1 or (ids.size and not np.can_cast(ids.dtype, np.int64, casting="safe")):
        raise InvalidArgument(f"subgraph nodes: expected a 1-D integer array, got {ids.dtype} of shape {ids.shape}")
    ids = ids.astype(np.int64, copy=False)
    first, gap_bytes, gaps = 0, 0, b""
    if ids.size:
        first = int(ids[0])
        steps = np.diff(ids)
        if first < 0 or (steps.size and int(steps.min()) < 1) or int(ids[-1]) >= ind.graph_nodes:
            raise InvalidArgument(f"cannot encode: {_id_fault(ids, ind.graph_nodes)}")
        if steps.size:
            largest = int(steps.max())
            gap_bytes = next(w for w, dt in _GAP_DTYPES.items() if largest <= np.iinfo(dt).max)
            gaps = steps.astype(_GAP_DTYPES[gap_bytes]).tobytes()
    digest = checksum_nodes(meta, int(ids.size), first, gap_bytes, gaps, _induction_tuple(ind))
    msg = subgraph_pb2.Subgraph(
        format_version=COMPACT_VERSION, job_id=meta[0], worker=meta[1], sequence=meta[2], seed=meta[3],
        checksum=digest,
        nodes=subgraph_pb2.NodeSet(count=int(ids.size), first=first, gap_bytes=gap_bytes, gaps=gaps),
        induction=subgraph_pb2.Induction(
            graph_nodes=ind.graph_nodes, graph_edges=ind.graph_edges, normalization=ind.normalization,
            norm_subgraphs=ind.norm_subgraphs, norm_seed=ind.norm_seed, train_nodes=ind.train_nodes),
    )
    return msg.SerializeToString()


def decode_nodes(data: bytes | bytearray | memoryview) -> SubgraphNodes:
    """Parse and validate a version-2 message.

    Returns:
        The node set (a read-only int64 array) and its induction.

    Raises:
        DecodeError: naming the field that is wrong.
    """
    try:
        msg = subgraph_pb2.Subgraph.FromString(bytes(data))
    except ProtobufDecodeError as exc:
        raise DecodeError(f"subgraph message: not a valid protobuf message ({exc})") from None
    if msg.format_version != COMPACT_VERSION:
        raise DecodeError(f"subgraph format_version: got {msg.format_version}, expected {COMPACT_VERSION}")
    for name in ARRAYS:  # version 1's arrays: a message is one form or the other
        if msg.HasField(name):
            raise DecodeError(f"subgraph {name}: not part of format_version {COMPACT_VERSION} (a node set)")
    for name in ("nodes", "induction"):
        if not msg.HasField(name):
            raise DecodeError(f"subgraph {name}: missing")
    nodes, pb = msg.nodes, msg.induction
    induction = Induction(graph_nodes=pb.graph_nodes, graph_edges=pb.graph_edges, normalization=pb.normalization,
                          norm_subgraphs=pb.norm_subgraphs, norm_seed=pb.norm_seed, train_nodes=pb.train_nodes)
    meta = (msg.job_id, msg.worker, msg.sequence, msg.seed)
    expected = checksum_nodes(meta, nodes.count, nodes.first, nodes.gap_bytes, nodes.gaps,
                              _induction_tuple(induction))
    if msg.checksum != expected:
        raise DecodeError(f"subgraph checksum: message says {msg.checksum:#018x}, its contents hash to "
                          f"{expected:#018x} (the message was corrupted)")
    induction = _checked_induction(induction, DecodeError)
    node_ids = _unpack_ids(nodes.count, nodes.first, nodes.gap_bytes, nodes.gaps, induction.graph_nodes)
    return SubgraphNodes(node_ids=node_ids, induction=induction, job_id=meta[0], worker=meta[1],
                         sequence=meta[2], seed=meta[3])


def decode_entry(buf: bytes | bytearray | memoryview) -> Subgraph | SubgraphNodes:
    """Decode a pool entry of either version: a whole :class:`Subgraph` (1) or a :class:`SubgraphNodes` (2).

    Version 1 is decoded as by ``decode_owned`` (views of ``buf``, which nobody may write to afterwards).

    Raises:
        DecodeError: naming the field that is wrong.
    """
    if format_version(buf) == COMPACT_VERSION:
        return decode_nodes(buf)
    return decode_owned(buf)


def format_version(buf: bytes | bytearray | memoryview) -> int:
    """The message's ``format_version`` (0 when absent or when the message cannot be walked).

    Encoders write field 1 first (protobuf serializes in field order), so two
    bytes answer; any other order is walked.
    """
    if len(buf) >= 2 and buf[0] == _VERSION_KEY and buf[1] < 0x80:
        return int(buf[1])
    version = 0
    try:
        for number, wire_type, value, _ in pw.iter_fields(buf, 0, len(buf), "subgraph message"):
            if number == 1 and wire_type == pw.VARINT:
                version = value  # the last one wins, as in protobuf
    except DecodeError:
        return 0  # the decoder of version 1 says what is wrong
    return version


_VERSION_KEY = pw.tag(1, pw.VARINT)[0]


def _unpack_ids(count: int, first: int, gap_bytes: int, gaps: bytes, graph_nodes: int) -> np.ndarray:
    """The ids a node set's fields describe, checked to be strictly ascending and within ``[0, graph_nodes)``."""
    if not 0 <= count <= graph_nodes:
        raise DecodeError(f"subgraph nodes.count: {count} ids claimed, the graph has {graph_nodes} nodes")
    if count < 2:
        if gap_bytes or gaps:
            raise DecodeError(f"subgraph nodes.gaps: {len(gaps)} bytes of width {gap_bytes} for {count} id(s)")
        if count == 1 and not 0 <= first < graph_nodes:
            raise DecodeError(f"subgraph nodes.first: {first} out of range [0, {graph_nodes})")
        ids = np.full(count, first, dtype=np.int64)
        ids.flags.writeable = False
        return ids
    dtype = _GAP_DTYPES.get(gap_bytes)
    if dtype is None:
        raise DecodeError(f"subgraph nodes.gap_bytes: {gap_bytes}, expected 1, 2, 4 or 8")
    if len(gaps) != (count - 1) * gap_bytes:
        raise DecodeError(f"subgraph nodes.gaps: {len(gaps)} bytes, {count} ids of width {gap_bytes} need "
                          f"{(count - 1) * gap_bytes}")
    if not 0 <= first < graph_nodes:
        raise DecodeError(f"subgraph nodes.first: {first} out of range [0, {graph_nodes})")
    steps = np.frombuffer(gaps, dtype=dtype)
    # Each gap below graph_nodes (<= 2**31) before summing: no sum of at most 2**31 of them overflows int64.
    if int(steps.min()) < 1 or int(steps.max()) >= graph_nodes:
        bad = int(np.flatnonzero((steps < 1) | (steps >= graph_nodes))[0])
        what = "0: ids not strictly ascending" if steps[bad] < 1 else f"{int(steps[bad])}: beyond the graph"
        raise DecodeError(f"subgraph nodes.gaps: gap {bad} is {what}")
    ids = np.empty(count, dtype=np.int64)
    ids[0] = first
    np.cumsum(steps, dtype=np.int64, out=ids[1:])
    ids[1:] += first
    if ids[-1] >= graph_nodes:
        bad = int(np.searchsorted(ids, graph_nodes))
        raise DecodeError(f"subgraph nodes: id {int(ids[bad])} at position {bad} out of range [0, {graph_nodes})")
    ids.flags.writeable = False
    return ids


def _id_fault(ids: np.ndarray, graph_nodes: int) -> str:
    """What is wrong with a node set an encoder was given (it is known to be wrong)."""
    if ids[0] < 0:
        return f"subgraph node_ids: position 0 (value {int(ids[0])}) negative"
    steps = np.diff(ids)
    if steps.size and steps.min() < 1:
        at = int(np.flatnonzero(steps < 1)[0]) + 1
        return f"subgraph node_ids: position {at} (value {int(ids[at])}) not strictly ascending"
    return f"subgraph node_ids: id {int(ids[-1])} out of range [0, {graph_nodes}) (the graph's nodes)"


def _checked_induction(ind: object, error: type[Exception]) -> Induction:
    """``ind`` if every field is in range, else ``error`` naming the field."""
    if not isinstance(ind, Induction):
        raise error(f"subgraph induction: expected an Induction, got {type(ind).__name__}")
    for name, lo, hi in (("graph_nodes", 0, MAX_GRAPH_NODES), ("graph_edges", 0, _MAX_GRAPH_EDGES),
                         ("norm_subgraphs", 0, INT64[1]), ("norm_seed", 0, UINT64[1])):
        value = getattr(ind, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= int(value) <= hi:
            raise error(f"subgraph induction.{name}: {value!r} is not an integer in [{lo}, {hi}]")
    if ind.normalization and not (isinstance(ind.normalization, str) and _NORM_KEY.fullmatch(ind.normalization)):
        raise error(f"subgraph induction.normalization: {str(ind.normalization)[:200]!r} is not a normalization key "
                    "(letters, digits and _ . -, starting with a letter or digit, at most 128)")
    if not (isinstance(ind.train_nodes, str)
            and (ind.train_nodes == ALL_TRAIN_NODES or _TRAIN_DIGEST.fullmatch(ind.train_nodes))):
        raise error(f"subgraph induction.train_nodes: {str(ind.train_nodes)[:200]!r} is neither "
                    f"{ALL_TRAIN_NODES!r} nor a 16-hex-digit digest")
    return ind


def _induction_tuple(ind: Induction) -> tuple[int, int, str, int, int, str]:
    return (int(ind.graph_nodes), int(ind.graph_edges), ind.normalization, int(ind.norm_subgraphs),
            int(ind.norm_seed), ind.train_nodes)

