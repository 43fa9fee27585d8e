"""A worker that can never produce is not restarted forever: the service reports why."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import InvalidArgument, WorkerFailed


@pytest.fixture(scope="module")
def directed_dataset(tmp_path_factory):
    """A directed cycle: every induced subgraph with an edge is asymmetric, so sampling always fails."""
    from saintpipe.services.dataset.store import write_dataset

    n = 200
    indptr = np.arange(n + 1, dtype=np.int64)
    indices = ((np.arange(n) + 1) % n).astype(np.int32)
    out = tmp_path_factory.mktemp("samplersvc-directed") / "cycle"
    write_dataset(out, name="cycle", indptr=indptr, indices=indices, features=np.zeros((n, 2), np.float32),
                  labels=np.zeros(n, np.int64), splits={"train": np.arange(100), "val": np.arange(100, 150),
                                                        "test": np.arange(150, 200)}, symmetric=False)
    return out


def test_a_worker_failing_every_run_ends_the_service_with_its_error(make_service, directed_dataset, wait):
    service = make_service(workers=1, data=directed_dataset, norm_subgraphs=0, max_consecutive_failures=2,
                           sampler={"kind": "random_walk", "roots": 40, "walk_length": 3, "clip_multiple": None})
    wait(lambda: service.failure, 60, "the service to give up on the failing worker")
    with pytest.raises(WorkerFailed, match="symmetric"):
        service.raise_if_failed()
    assert service.stats().workers[0].restarts == 2


def test_a_failing_pre_sampling_is_reported_as_the_workers_error(make_service, directed_dataset):
    with pytest.raises(InvalidArgument, match="symmetric"):
        make_service(workers=1, data=directed_dataset, norm_subgraphs=4,
                     sampler={"kind": "random_walk", "roots": 40, "walk_length": 3, "clip_multiple": None})
