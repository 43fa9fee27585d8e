"""Sampler.sample_into: the arrays of sample(seed), written where the caller places them (e.g. a message buffer)."""

from __future__ import annotations

import numpy as np
import pytest
from sampler_graphs import random_graph, skewed_graph

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.pool.codec import MessageFramer, encode_subgraph, frame_subgraph, seal_subgraph
from saintpipe.services.sampler.config import EdgeConfig, FrontierConfig, NodeConfig, RandomWalkConfig
from saintpipe.services.sampler.normalization import estimate_normalization
from saintpipe.services.sampler.sampler import make_sampler

INDPTR, INDICES = skewed_graph(3000, 6.0, seed=31)
TRAIN = np.arange(0, 3000, 3)
CONFIGS = [FrontierConfig(frontier_size=50, node_budget=400), RandomWalkConfig(roots=100),
           EdgeConfig(edge_budget=150), NodeConfig(node_budget=300)]
FIELDS = ("node_ids", "indptr", "indices", "edge_weights", "edge_weights_t", "loss_weights")


def heap_place(store: dict):
    """A place() handing out fresh arrays of the asked sizes, filled with garbage the kernels must overwrite."""

    def place(n: int, e: int):
        store["sizes"] = (n, e)
        arrays = (np.full(n, -7, np.int64), np.full(n + 1, -7, np.int64), np.full(e, -7, np.int32),
                  np.full(e, np.nan, np.float32), np.full(e, np.nan, np.float32), np.full(n, np.nan, np.float32))
        store["arrays"] = arrays
        return arrays

    return place


def same(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELDS) and a.seed == b.seed


@pytest.mark.parametrize("normalized", [False, True], ids=["plain", "normalized"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
def test_sample_into_writes_exactly_what_sample_returns(config, normalized):
    norm = (estimate_normalization(INDPTR, INDICES, config, num_subgraphs=8, train_nodes=TRAIN, processes=1)
            if normalized else None)
    sampler = make_sampler(config, INDPTR, INDICES, normalization=norm, train_nodes=TRAIN)
    reference = make_sampler(config, INDPTR, INDICES, normalization=norm, train_nodes=TRAIN)
    for seed in (0, 1, 2**63 + 11):
        store: dict = {}
        placed = sampler.sample_into(seed, heap_place(store))
        expected = reference.sample(seed)
        assert same(placed, expected)
        assert store["sizes"] == (expected.num_nodes, expected.num_edges)
        assert all(a is b for a, b in zip((getattr(placed, f) for f in FIELDS), store["arrays"]))
    assert same(sampler.sample(5), reference.sample(5))  # sample and sample_into share the workspace cleanly


def test_sample_into_a_framed_message_gives_the_bytes_of_encode_subgraph():
    sampler = make_sampler(RandomWalkConfig(roots=60), INDPTR, INDICES, train_nodes=TRAIN)
    framer = MessageFramer("job-7", 3)
    buf = np.full(1 << 20, 0xAB, dtype=np.uint8)
    for sequence in (-3, 0, 1, 2**40):
        framed: list = []

        def place(n, e, framed=framed, sequence=sequence):
            framed.append(framer.frame(lambda size: buf, n, e, sequence=sequence, seed=100 + abs(sequence)))
            return framed[0].arrays

        sampler.sample_into(100 + abs(sequence), place)
        nbytes = seal_subgraph(framed[0])
        expected = sampler.sample(100 + abs(sequence), job_id="job-7", worker=3, sequence=sequence)
        assert bytes(buf[:nbytes]) == encode_subgraph(expected)


def test_a_failing_place_leaves_the_sampler_ready_for_the_next_subgraph():
    sampler = make_sampler(RandomWalkConfig(roots=80), INDPTR, INDICES)
    reference = make_sampler(RandomWalkConfig(roots=80), INDPTR, INDICES)

    def full(n, e):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        sampler.sample_into(3, full)
    # The global-to-local map was reset: the same seed again, and the next one, are what a fresh sampler draws.
    assert same(sampler.sample(3), reference.sample(3))
    assert same(sampler.sample_into(4, heap_place({})), reference.sample(4))


@pytest.mark.parametrize("bad, match", [
    (lambda n, e: (np.zeros(n, np.int64),) * 5, "returned 5 arrays"),
    (lambda n, e: (np.zeros(n, np.int32), np.zeros(n + 1, np.int64), np.zeros(e, np.int32),
                   np.zeros(e, np.float32), np.zeros(e, np.float32), np.zeros(n, np.float32)), "node_ids"),
    (lambda n, e: (np.zeros(n, np.int64), np.zeros(n + 1, np.int64), np.zeros(e + 1, np.int32),
                   np.zeros(e, np.float32), np.zeros(e, np.float32), np.zeros(n, np.float32)), "indices"),
    (lambda n, e: (np.zeros(n, np.int64), np.zeros(n + 1, np.int64), np.zeros(e, np.int32),
                   np.zeros(2 * e, np.float32)[::2], np.zeros(e, np.float32), np.zeros(n, np.float32)),
     "edge_weights must be a writable contiguous"),
])
def test_arrays_that_do_not_fit_are_refused_before_any_write(bad, match):
    """The kernels write without bounds checks: a wrong size or dtype must never reach them."""
    sampler = make_sampler(RandomWalkConfig(roots=40), INDPTR, INDICES)
    reference = make_sampler(RandomWalkConfig(roots=40), INDPTR, INDICES)
    with pytest.raises(InvalidArgument, match=match):
        sampler.sample_into(9, bad)
    assert same(sampler.sample(9), reference.sample(9))


def test_a_directed_graph_is_refused_as_sample_does():
    indptr = np.array([0, 2, 4, 5], dtype=np.int64)  # a triangle whose edge 2 -> 0 is missing
    indices = np.array([1, 2, 0, 2, 1], dtype=np.int32)
    sampler = make_sampler(RandomWalkConfig(roots=30, clip_multiple=None), indptr, indices, check_graph=False)
    with pytest.raises(InvalidArgument, match="not symmetric"):
        sampler.sample(1)
    with pytest.raises(InvalidArgument, match="not symmetric"):
        sampler.sample_into(1, heap_place({}))


def test_frame_subgraph_refuses_ids_out_of_range_and_small_buffers():
    with pytest.raises(InvalidArgument, match="sequence"):
        frame_subgraph(lambda size: np.zeros(size, np.uint8), 3, 4, sequence=2**63)
    with pytest.raises(InvalidArgument, match="seed"):
        frame_subgraph(lambda size: np.zeros(size, np.uint8), 3, 4, seed=-1)
    with pytest.raises(InvalidArgument, match="worker"):
        MessageFramer("job", 2**63)
    with pytest.raises(InvalidArgument, match="the message needs"):
        frame_subgraph(lambda size: np.zeros(size - 1, np.uint8), 3, 4)


def test_seal_checks_what_was_written_when_asked():
    indptr, indices = random_graph(50, 200, seed=2)
    sampler = make_sampler(RandomWalkConfig(roots=10), indptr, indices)
    buf = np.zeros(1 << 16, dtype=np.uint8)
    framed: list = []

    def place(n, e):
        framed.append(frame_subgraph(lambda size: buf, n, e))
        return framed[0].arrays

    sampler.sample_into(1, place)
    framed[0].arrays[2][0] = 10**6  # an index out of range, as a broken kernel might write
    assert seal_subgraph(framed[0], validate=False) > 0  # trusted: not looked at (the consumer's decoder checks)
    with pytest.raises(InvalidArgument, match="cannot encode"):
        seal_subgraph(framed[0], validate=True)
