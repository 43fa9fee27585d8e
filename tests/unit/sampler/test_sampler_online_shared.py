"""Online normalization shared by a host's workers: one state file, every worker's counts, the supervisor's refresh."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest

from sampler_graphs import random_graph
from saintpipe.core import shm_owners
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import RandomWalkConfig
from saintpipe.services.sampler.normalization import closed_form_coefficients
from saintpipe.services.sampler.online import OnlineNormalization
from saintpipe.services.sampler.online_shared import (
    PREFIX,
    OnlineRefresher,
    SharedOnlineCounts,
    SharedOnlineState,
    remove_leftovers,
)
from saintpipe.services.sampler.sampler import make_sampler, train_mask

INDPTR, INDICES = random_graph(90, 260, seed=5, isolated=3)
TRAIN = np.arange(0, 90, 3)
CONFIG = RandomWalkConfig(roots=6, walk_length=2, clip_multiple=None)
LOSS, ALPHA = closed_form_coefficients(INDPTR, INDICES, CONFIG, TRAIN)


@pytest.fixture
def state(tmp_path):
    state = SharedOnlineState.create(LOSS, ALPHA, max_subgraphs=40, directory=tmp_path)
    yield state
    state.close()


def _subgraphs(count, seed=0):
    """(node ids, CSR positions) of ``count`` subgraphs from a real sampler (private, unnormalized)."""
    sampler = make_sampler(CONFIG, INDPTR, INDICES, train_nodes=TRAIN)
    return [(sg.node_ids.copy(), eids.copy()) for sg, eids in (sampler.sample_arrays(seed + i) for i in range(count))]


def test_a_new_state_holds_the_prior_and_names_its_creator(state, tmp_path):
    np.testing.assert_array_equal(state.loss, LOSS)
    np.testing.assert_array_equal(state.alpha, ALPHA)
    assert not state.node_counts.any() and not state.edge_counts.any()
    assert state.subgraphs == 0 and state.max_subgraphs == 40 and not state.converged
    assert state.name.startswith(PREFIX + shm_owners.current().tag)
    assert os.stat(state.path).st_mode & 0o777 == 0o600


def test_two_workers_count_into_one_state_and_the_refresh_equals_one_sampler_that_drew_everything(state, tmp_path):
    subgraphs = _subgraphs(40)
    workers = [SharedOnlineCounts(SharedOnlineState.attach(state.name, LOSS.size, ALPHA.size, tmp_path))
               for _ in range(2)]
    refresher = OnlineRefresher(state, INDPTR, LOSS, ALPHA, train_mask(TRAIN, LOSS.size), strength=4.0)
    alone = OnlineNormalization(INDPTR, LOSS, ALPHA, train_mask(TRAIN, LOSS.size), 4.0, max_subgraphs=40)
    for i, (nodes, eids) in enumerate(subgraphs):
        workers[i % 2].observe(nodes, eids)
        alone.observe(nodes, eids)
        if i == 0:
            assert refresher.refresh_if_due()  # after the first subgraph, as a private sampler does
            assert not refresher.refresh_if_due()
    assert state.subgraphs == 40 and state.converged and workers[0].converged
    np.testing.assert_array_equal(state.edge_counts, alone.edge_counts)
    np.testing.assert_array_equal(state.node_counts, alone.node_counts)
    assert refresher.refresh_if_due()  # the final coefficients, on every worker's counts
    np.testing.assert_array_equal(state.alpha, alone.alpha)
    np.testing.assert_array_equal(state.loss, alone.loss)
    assert not np.array_equal(state.alpha, ALPHA)  # the counts moved them
    assert not refresher.refresh_if_due() and state.refreshes == refresher.estimator.refreshes
    workers[1].observe(*subgraphs[0])  # counting is over: nothing more is added
    assert state.subgraphs == 40
    for w in workers:
        w.state.close()


def _count_in_child(name, directory, seed, count):
    worker = SharedOnlineCounts(SharedOnlineState.attach(name, LOSS.size, ALPHA.size, directory))
    for nodes, eids in _subgraphs(count, seed):
        worker.observe(nodes, eids)


def test_processes_counting_at_once_lose_no_count(tmp_path):
    state = SharedOnlineState.create(LOSS, ALPHA, max_subgraphs=0, directory=tmp_path)  # 0: count for ever
    ctx = multiprocessing.get_context("spawn")
    children = [ctx.Process(target=_count_in_child, args=(state.name, tmp_path, 1000 * k, 150)) for k in range(3)]
    for c in children:
        c.start()
    for c in children:
        c.join(120)
        assert c.exitcode == 0
    want_edges = np.zeros(ALPHA.size, dtype=np.int64)
    want_nodes = np.zeros(LOSS.size, dtype=np.int64)
    for k in range(3):
        for nodes, eids in _subgraphs(150, 1000 * k):
            np.add.at(want_edges, eids, 1)
            np.add.at(want_nodes, nodes, 1)
    assert state.subgraphs == 450
    np.testing.assert_array_equal(state.edge_counts, want_edges)
    np.testing.assert_array_equal(state.node_counts, want_nodes)
    state.close()


def test_attach_finds_nothing_on_another_host_and_refuses_a_foreign_or_unfinished_file(state, tmp_path):
    missing = PREFIX + "1-2-3-" + "0" * 16
    assert SharedOnlineState.attach(missing, LOSS.size, ALPHA.size, tmp_path) is None
    with pytest.raises(InvalidArgument, match="not an online normalization state file"):
        SharedOnlineState.attach("../etc/passwd", LOSS.size, ALPHA.size, tmp_path)
    with pytest.raises(InvalidArgument, match="bytes, a state of 190 nodes"):
        SharedOnlineState.attach(state.name, LOSS.size + 100, ALPHA.size, tmp_path)
    with pytest.raises(InvalidArgument, match="not a complete online normalization state of 91 nodes"):
        SharedOnlineState.attach(state.name, LOSS.size + 1, ALPHA.size, tmp_path)  # same size, other graph
    state.header[0] = 0  # not yet complete (its creator writes the magic last)
    with pytest.raises(InvalidArgument, match="not a complete online normalization state"):
        SharedOnlineState.attach(state.name, LOSS.size, ALPHA.size, tmp_path)


def test_a_sampler_counts_into_the_named_state_or_keeps_its_own(state, tmp_path, monkeypatch):
    from saintpipe.services.sampler import online_shared

    monkeypatch.setattr(online_shared, "SHM_DIR", tmp_path)
    norm = Normalization(loss_coefficients=LOSS, aggregator_coefficients=ALPHA, method="online", strength=4.0,
                         num_subgraphs=40, shared_state=state.name)
    shared = make_sampler(CONFIG, INDPTR, INDICES, normalization=norm, train_nodes=TRAIN)
    assert isinstance(shared.online, SharedOnlineCounts)
    first, _ = shared.sample_arrays(3)
    assert state.subgraphs == 1
    state.alpha[:] = 2 * ALPHA  # the supervisor's refresh, seen by the sampler's next subgraph
    again, _ = make_sampler(CONFIG, INDPTR, INDICES, normalization=norm, train_nodes=TRAIN).sample_arrays(3)
    np.testing.assert_allclose(again.edge_weights, first.edge_weights / 2, rtol=1e-6)  # weights are 1 / alpha
    elsewhere = Normalization(loss_coefficients=LOSS, aggregator_coefficients=ALPHA, method="online", strength=4.0,
                              shared_state=PREFIX + "1-2-3-" + "f" * 16)
    private = make_sampler(CONFIG, INDPTR, INDICES, normalization=elsewhere, train_nodes=TRAIN)
    assert isinstance(private.online, OnlineNormalization)


def test_a_dead_supervisors_file_is_a_leftover_and_a_live_ones_is_not(state, tmp_path):
    dead = tmp_path / f"{PREFIX}{shm_owners.pid_namespace()}-{2**31 - 2}-1-{'a' * 16}"
    dead.write_bytes(b"x")
    removed = remove_leftovers(tmp_path)
    assert [f.name for f in removed] == [dead.name]
    assert state.path.exists()


def test_no_room_in_shared_memory_is_an_error_at_creation_not_a_crash_later(tmp_path, monkeypatch):
    def full(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError, match="No space left"):
        SharedOnlineState.create(LOSS, ALPHA, max_subgraphs=4, directory=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing half made is left
