"""A worker's sequence numbers are the steps of its sampler's dependent chain (kappa > 1)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from saintpipe.services.sampler.config import RandomWalkConfig
from saintpipe.services.sampler.parallel import chain_key, subgraph_seed
from saintpipe.services.sampler.sampler import make_sampler
from saintpipe.services.sampler_service.production import Producer
from saintpipe.services.sampler_service.worker import build_sampler
from saintpipe.services.dataset.csr import edges_to_csr

_RNG = np.random.default_rng(4)
INDPTR, INDICES = edges_to_csr(_RNG.integers(0, 3000, 12_000), _RNG.integers(0, 3000, 12_000), 3000)
CONFIG = RandomWalkConfig(roots=60, walk_length=2, kappa=8)


class Cursor:
    def __init__(self, start: int) -> None:
        self.next = start

    def reserve(self) -> int:
        self.next += 1
        return self.next - 1


class Pool:
    """Takes ``stop_after`` subgraphs on the pusher thread, then sets ``stop``."""

    transport = "redis"

    def __init__(self, stop: threading.Event, stop_after: int) -> None:
        self.stop, self.stop_after, self.taken = stop, stop_after, []

    def put(self, sg, timeout: float | None = None) -> str:
        self.taken.append(sg)
        if len(self.taken) >= self.stop_after:
            self.stop.set()
        return f"{len(self.taken)}-0"


@pytest.mark.parametrize("start", [0, 37])
def test_the_producer_draws_sequence_s_at_step_s_of_the_workers_chain(start):
    worker, job_seed = 2, 11
    sampler = make_sampler(CONFIG, INDPTR, INDICES, chain=chain_key(job_seed, worker))
    pool = Pool(threading.Event(), 6)
    Producer(sampler, pool, Cursor(start), job_id="job", worker=worker, job_seed=job_seed, push_poll_s=0.01,
             inline=False).run(pool.stop)
    replay = make_sampler(CONFIG, INDPTR, INDICES, chain=chain_key(job_seed, worker))
    assert [sg.sequence for sg in pool.taken] == list(range(start, start + 6))
    for sg in pool.taken:
        assert sg.seed == subgraph_seed(job_seed, worker, sg.sequence)
        assert np.array_equal(sg.node_ids, replay.sample(sg.seed, step=sg.sequence).node_ids)
    shared = [np.intersect1d(a.node_ids, b.node_ids).size / np.union1d(a.node_ids, b.node_ids).size
              for a, b in zip(pool.taken, pool.taken[1:])]
    assert min(shared) > 0.5  # consecutive pushes of one worker overlap (independent ones: ~0.05 here)


def test_each_worker_builds_its_sampler_on_its_own_chain():
    dataset = SimpleNamespace(indptr=INDPTR, indices=INDICES, splits={"train": np.arange(0, 3000, 2)})
    chains = {w: build_sampler(CONFIG, dataset, chain=chain_key(5, w)).chain for w in range(3)}
    assert len(set(chains.values())) == 3
    assert chains[1] == np.uint64(chain_key(5, 1))
    assert build_sampler(CONFIG, dataset).dependent


def test_kappa_is_set_like_the_other_sampler_parameters(tmp_path):
    import argparse

    from saintpipe.core.config import load_config
    from saintpipe.core.errors import ConfigError
    from saintpipe.pipeline.config import load_pipeline_config
    from saintpipe.services.sampler_service.cli import sampler_flags
    from saintpipe.services.sampler_service.config import SECTION, SamplerServiceConfig

    path = tmp_path / "run.toml"
    path.write_text("[samplers.sampler]\nkind = \"node\"\nkappa = 8\n")
    assert load_pipeline_config(path, environ={}).samplers.sampler.kappa == 8
    env = {"SAINTPIPE_SAMPLERS__SAMPLER__KAPPA": "32"}
    assert load_pipeline_config(path, environ=env).samplers.sampler.kappa == 32  # environment over file
    assert load_pipeline_config(environ=env).samplers.sampler.kappa == 32  # the demo's random walks
    flags = argparse.Namespace(sampler_config=None, sampler_kind=None, param=["kappa=16", "roots=100"])
    service = load_config(SamplerServiceConfig, None, {"data": tmp_path, "sampler": sampler_flags(flags)},
                          environ={}, section=SECTION)
    assert (service.sampler.kind, service.sampler.kappa, service.sampler.roots) == ("random_walk", 16, 100)
    path.write_text("[samplers.sampler]\nkind = \"edge\"\nkappa = 0\n")
    with pytest.raises(ConfigError, match=r"kappa") as err:
        load_pipeline_config(path, environ={})
    assert str(path) in str(err.value)
