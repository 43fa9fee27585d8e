"""The embedded pipeline's lifetime: closing it leaves nothing behind, also after a component died; and the
training graph (``[samplers] graph = "train"``) reaches the loader's minibatches.

Each test starts its own embedded pipeline (Ray allows one local cluster per
process, so none may run alongside: this module runs after
test_loader_batches.py's fixture has stopped its own).
"""

from __future__ import annotations

import signal

import numpy as np
import pytest
import ray
from saintpipe.services.dataset.store import open_dataset
from torch.utils.data import DataLoader

from saintpipe.core.errors import ServiceUnavailable
from saintpipe.loader import SubgraphLoader
from tests.integration.loader.conftest import Leftovers, overrides, shm_files, unique_job


def assert_nothing_left(seen: Leftovers, job: str) -> None:
    assert len(seen.seen) >= 4, f"the process tree was not observed: {seen.seen}"  # redis, 2 shards, ray
    assert seen.alive() == [], "processes left behind"
    assert seen.listening() == [], "ports still listening"
    assert shm_files(job) == [], "shared-memory files left behind"
    assert not ray.is_initialized()


def test_training_graph_minibatches_then_close_leaves_no_process_port_or_shm_file(loader_data):
    dataset = open_dataset(loader_data)
    train = dataset.splits["train"]
    in_train = np.zeros(dataset.num_nodes, dtype=bool)
    in_train[train] = True
    job = unique_job("close")
    cfg = overrides(job)
    cfg["samplers"] = {**cfg["samplers"], "graph": "train"}
    seen = Leftovers()
    with SubgraphLoader.embedded(loader_data, steps=4, overrides=cfg) as loader:
        batches = list(DataLoader(loader, batch_size=None))
        seen.observe(loader.pipeline)
        assert shm_files(job), "expected the job's shared-memory slots while it runs (loopback Redis)"
    assert len(batches) == 4
    for b in batches:  # drawn from the training graph: no validation or test node
        ids = b.node_ids.numpy()
        assert in_train[ids].all() and bool(b.train_mask.all())
        # The self-loop degree is the training graph's, as a trainer's batch has it.
        expected = [int(in_train[dataset.indices[dataset.indptr[g]:dataset.indptr[g + 1]]].sum()) for g in ids]
        np.testing.assert_array_equal(b.degree.numpy(), np.asarray(expected, dtype=np.float32))
    assert_nothing_left(seen, job)


def test_a_dead_feature_shard_is_named_and_close_still_stops_the_rest(loader_data):
    job = unique_job("dead")
    seen = Leftovers()
    cfg = {**overrides(job), "trainer": {"feature_retry_deadline_s": 2}}  # the prefetch gives up on it soon
    loader = SubgraphLoader.embedded(loader_data, overrides=cfg)
    try:
        batches = iter(loader)
        next(batches)
        seen.observe(loader.pipeline)
        shard = loader.pipeline.shards.processes[1][0].process
        shard.send_signal(signal.SIGKILL)
        shard.wait(10)
        loader.pipeline.supervisor.check_now()  # what the watchdog does every [run] watch_interval_s
        named = r"embedded pipeline: feature shard 1 \(pid \d+, 127\.0\.0\.1:\d+\) exited unexpectedly"
        with pytest.raises(ServiceUnavailable, match=named):
            next(batches)
    finally:
        loader.close()
    assert_nothing_left(seen, job)
