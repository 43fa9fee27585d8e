"""The compact subgraph message (format_version 2, a node set): round trips, sizes, and hostile messages."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import DecodeError, InvalidArgument
from saintpipe.core.subgraph import Induction, SubgraphNodes
from saintpipe.protos import subgraph_pb2
from saintpipe.services.pool.codec import schema
from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph
from saintpipe.services.pool.codec.compact import decode_entry, decode_nodes, encode_nodes, format_version
from saintpipe.services.pool.pool import resolve_wire
from saintpipe.services.pool.synthetic import random_subgraph

GRAPH = Induction(graph_nodes=10_000, graph_edges=80_000, normalization="random_walk-0123456789abcdef",
                  norm_subgraphs=50, norm_seed=7, train_nodes="00112233aabbccdd")


def nodes(ids, induction: Induction = GRAPH, **meta) -> SubgraphNodes:
    return SubgraphNodes(np.asarray(ids, dtype=np.int64), induction, **{"job_id": "job-1", "worker": 3,
                                                                         "sequence": 17, "seed": 2**64 - 5, **meta})


def message(count: int, first: int, gap_bytes: int, gaps: bytes, *, induction: Induction = GRAPH,
            checksum: int | None = None, **extra) -> bytes:
    """A version-2 message built with the generated classes, with a valid checksum unless given."""
    meta = ("j", 1, 2, 3)
    if checksum is None:
        checksum = schema.checksum_nodes(meta, count, first, gap_bytes, gaps, (
            induction.graph_nodes, induction.graph_edges, induction.normalization, induction.norm_subgraphs,
            induction.norm_seed, induction.train_nodes))
    msg = subgraph_pb2.Subgraph(
        format_version=2, job_id=meta[0], worker=meta[1], sequence=meta[2], seed=meta[3], checksum=checksum,
        nodes=subgraph_pb2.NodeSet(count=count, first=first, gap_bytes=gap_bytes, gaps=gaps),
        induction=subgraph_pb2.Induction(
            graph_nodes=induction.graph_nodes, graph_edges=induction.graph_edges,
            normalization=induction.normalization, norm_subgraphs=induction.norm_subgraphs,
            norm_seed=induction.norm_seed, train_nodes=induction.train_nodes),
        **extra)
    return msg.SerializeToString()


@pytest.mark.parametrize("ids, width", [
    ([], 0), ([9_999], 0), ([0, 1, 256], 1), ([5, 261, 262], 2), ([0, 7_000, 6_999], None),
])
def test_a_node_set_round_trips_in_the_narrowest_gap_width(ids, width):
    if width is None:  # unsorted: refused, naming the position
        with pytest.raises(InvalidArgument, match="position 2 .* not strictly ascending"):
            encode_nodes(nodes(ids))
        return
    data = encode_nodes(nodes(ids))
    parsed = subgraph_pb2.Subgraph.FromString(data)  # any protobuf reader reads it
    assert parsed.format_version == 2 and parsed.nodes.count == len(ids) and parsed.nodes.gap_bytes == width
    assert format_version(data) == 2
    back = decode_entry(data)
    assert isinstance(back, SubgraphNodes) and back.equals(nodes(ids))
    assert back.node_ids.dtype == np.int64 and not back.node_ids.flags.writeable


def test_wide_gaps_take_four_bytes_and_a_random_walk_set_takes_about_two_bytes_a_node():
    wide = nodes([3, 70_000], Induction(graph_nodes=100_000, graph_edges=1))
    assert subgraph_pb2.Subgraph.FromString(encode_nodes(wide)).nodes.gap_bytes == 4
    rng = np.random.default_rng(0)
    ids = np.unique(rng.integers(0, 262_144, 8_000))
    big = Induction(graph_nodes=262_144, graph_edges=4_000_000)
    data = encode_nodes(SubgraphNodes(ids, big))
    assert subgraph_pb2.Subgraph.FromString(data).nodes.gap_bytes == 2
    assert len(data) < 2.1 * ids.size  # against 8 bytes a node for node_ids alone in format_version 1


def test_both_versions_decode_through_decode_entry_and_the_whole_decoder_points_at_it():
    whole = random_subgraph(50, 200, seed=1)
    assert decode_entry(encode_subgraph(whole)).equals(whole)
    with pytest.raises(DecodeError, match="format_version: got 2.*decode_entry"):
        decode_subgraph(encode_nodes(nodes([1, 2, 3])))


def test_a_message_with_its_fields_in_another_order_still_reads_as_version_2():
    data = encode_nodes(nodes([1, 5, 9]))
    # Move the version field (2 bytes at the front) to the end: protobuf allows any order.
    reordered = data[2:] + data[:2]
    assert format_version(reordered) == 2
    assert decode_entry(reordered).equals(nodes([1, 5, 9]))


@pytest.mark.parametrize("ids, induction, match", [
    ([1, 1], GRAPH, "position 1 .* not strictly ascending"),
    ([-1, 4], GRAPH, "negative"),
    ([4, 10_000], GRAPH, "10000 out of range"),
    ([1], Induction(10, 1, normalization="../etc"), "normalization: '../etc' is not a normalization key"),
    ([1], Induction(10, 1, normalization="a/b"), "normalization"),
    ([1], Induction(10, 1, train_nodes="everything"), "train_nodes"),
    ([1], Induction(2**40, 1), "graph_nodes"),
])
def test_the_encoder_refuses_what_a_trainer_could_not_use(ids, induction, match):
    with pytest.raises(InvalidArgument, match=match):
        encode_nodes(nodes(ids, induction))


HOSTILE = {
    "unsorted (a zero gap)": (lambda: message(3, 5, 1, bytes([2, 0])), "gap 1 is 0: ids not strictly ascending"),
    "first id out of range": (lambda: message(2, 10_000, 1, bytes([1])), "nodes.first: 10000 out of range"),
    "last id out of range": (lambda: message(3, 9_000, 2, np.array([500, 600], "<u2").tobytes()),
                             r"id 10100 at position 2 out of range \[0, 10000\)"),
    "a gap beyond the graph": (lambda: message(2, 0, 4, np.array([2**31], "<u4").tobytes()), "beyond the graph"),
    "more ids than the graph has": (lambda: message(2**31, 0, 1, b"\1"), "2147483648 ids claimed"),
    "gaps shorter than claimed": (lambda: message(1_000, 0, 1, b"\1" * 10), "10 bytes, 1000 ids of width 1 need 999"),
    "gap width 3": (lambda: message(3, 0, 3, b"\1" * 6), "gap_bytes: 3"),
    "gaps for a single id": (lambda: message(1, 0, 1, b"\1"), "nodes.gaps"),
    "bad checksum": (lambda: message(2, 0, 1, b"\1", checksum=12345), "checksum: message says"),
    "a version-1 array too": (lambda: message(2, 0, 1, b"\1", node_ids=subgraph_pb2.Array(dtype="<i8")),
                              "node_ids: not part of format_version 2"),
    "no induction": (lambda: subgraph_pb2.Subgraph(format_version=2, nodes=subgraph_pb2.NodeSet()).SerializeToString(),
                     "induction: missing"),
    "no node set": (lambda: subgraph_pb2.Subgraph(format_version=2,
                                                  induction=subgraph_pb2.Induction()).SerializeToString(),
                    "nodes: missing"),
    "a path for a normalization": (lambda: message(2, 0, 1, b"\1", induction=Induction(10, 1, normalization="..")),
                                   "not a normalization key"),
    "truncated": (lambda: encode_nodes(nodes([1, 2, 300]))[:-20], "not a valid protobuf message|checksum"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_messages_raise_decode_errors_naming_the_field(case):
    build, match = HOSTILE[case]
    with pytest.raises(DecodeError, match=match):
        decode_entry(build())


def test_corrupted_bytes_never_decode_into_another_node_set():
    data = bytearray(encode_nodes(nodes(np.arange(0, 9_000, 7))))
    rng = np.random.default_rng(3)
    original = nodes(np.arange(0, 9_000, 7))
    for _ in range(300):
        bad = bytearray(data)
        at = int(rng.integers(len(bad)))
        bad[at] ^= 1 << int(rng.integers(8))
        try:
            got = decode_entry(bytes(bad))
        except DecodeError:
            continue
        assert isinstance(got, SubgraphNodes) and got.equals(original)  # a flip protobuf ignores


def test_the_wire_setting_resolves_to_node_sets_where_the_bytes_go_through_redis():
    assert resolve_wire("auto", "redis") == "nodes"
    assert resolve_wire("auto", "shared_memory") == "full"
    assert resolve_wire("full", "redis") == "full" and resolve_wire("nodes", "shared_memory") == "nodes"
    with pytest.raises(InvalidArgument, match="wire 'fast'"):
        resolve_wire("fast", "redis")
    assert decode_nodes(encode_nodes(nodes([4]))).node_ids.tolist() == [4]


def test_the_wire_setting_comes_from_the_environment_and_bad_values_name_it():
    from saintpipe.core.config import load_config
    from saintpipe.core.errors import ConfigError
    from saintpipe.services.pool.config import PoolConfig

    assert PoolConfig().wire == "auto"
    cfg = load_config(PoolConfig, environ={"SAINTPIPE_POOL__WIRE": "nodes"}, section="pool")
    assert cfg.wire == "nodes"
    with pytest.raises(ConfigError, match="wire"):
        load_config(PoolConfig, environ={"SAINTPIPE_POOL__WIRE": "smoke-signals"}, section="pool")
