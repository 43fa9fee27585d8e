"""The production loop's logic, pushing on a helper thread or on the drawing thread (fake pool and cursor)."""

from __future__ import annotations

import threading
import time

import pytest

from saintpipe.errors import SaintpipeTimeout, ServiceUnavailable
from services.pool.synthetic import random_subgraph
from services.sampler.parallel import subgraph_seed
from services.sampler_service.production import Producer


class Sampler:
    def sample(self, seed: int):
        return random_subgraph(6, 10, seed=seed % 1000)


class Cursor:
    def __init__(self, start: int = 0) -> None:
        self.next = start

    def reserve(self) -> int:
        self.next += 1
        return self.next - 1


class Pool:
    """Takes ``stop_after`` subgraphs, then sets ``stop``; refuses the first ``full_for`` attempts as a full pool."""

    def __init__(self, stop: threading.Event, stop_after: int, *, full_for: int = 0, fail: Exception | None = None,
                 transport: str = "redis") -> None:
        self.stop, self.stop_after, self.full_for, self.fail = stop, stop_after, full_for, fail
        self.transport = transport
        self.taken: list = []
        self.threads: set[str] = set()

    def put(self, sg, timeout: float | None = None) -> str:
        self.threads.add(threading.current_thread().name)
        if self.fail is not None:
            raise self.fail
        if self.full_for > 0:
            self.full_for -= 1
            time.sleep(min(timeout or 0.0, 0.01))
            raise SaintpipeTimeout("full")
        self.taken.append(sg)
        if len(self.taken) >= self.stop_after:
            self.stop.set()
        return f"{len(self.taken)}-0"


def produce(pool: Pool, inline: bool | None, start: int = 0) -> Producer:
    producer = Producer(Sampler(), pool, Cursor(start), job_id="job", worker=3, job_seed=7, push_poll_s=0.01,
                        inline=inline)
    producer.run(pool.stop)
    return producer


@pytest.mark.parametrize("inline", [True, False])
def test_subgraphs_are_stamped_in_sequence_and_counted(inline):
    pool = Pool(threading.Event(), 5)
    producer = produce(pool, inline, start=40)
    assert [sg.sequence for sg in pool.taken] == [40, 41, 42, 43, 44]
    assert all(sg.job_id == "job" and sg.worker == 3 and sg.seed == subgraph_seed(7, 3, sg.sequence)
               for sg in pool.taken)
    counts = producer.snapshot()
    assert counts.subgraphs == 5 and counts.nodes == sum(sg.num_nodes for sg in pool.taken)
    assert counts.pool_wait_seconds == 0.0
    on_main = pool.threads == {threading.current_thread().name}
    assert on_main is inline  # inline pushes on the drawing thread; otherwise a pusher thread does


@pytest.mark.parametrize("inline", [True, False])
def test_a_full_pool_is_waited_out_and_nothing_is_dropped(inline):
    pool = Pool(threading.Event(), 3, full_for=4)
    producer = produce(pool, inline)
    assert [sg.sequence for sg in pool.taken] == [0, 1, 2]  # the refused subgraph went in first, once room came
    counts = producer.snapshot()
    assert counts.subgraphs == 3 and counts.pool_wait_seconds > 0


@pytest.mark.parametrize("inline", [True, False])
def test_a_push_error_ends_the_run_with_it(inline):
    pool = Pool(threading.Event(), 3, fail=ServiceUnavailable("redis is away"))
    with pytest.raises(ServiceUnavailable, match="redis is away"):
        produce(pool, inline)


@pytest.mark.parametrize("inline", [True, False])
def test_a_stop_while_waiting_for_room_returns(inline):
    stop = threading.Event()
    pool = Pool(stop, 1, full_for=10**9)
    threading.Timer(0.2, stop.set).start()
    producer = produce(pool, inline)
    counts = producer.snapshot()
    assert counts.subgraphs == 0 and counts.pool_wait_seconds > 0.05  # the wait still counts


@pytest.mark.parametrize("transport, inline", [("shared_memory", True), ("redis", False)])
def test_the_default_follows_the_pools_transport(transport, inline):
    pool = Pool(threading.Event(), 2, transport=transport)
    produce(pool, None)
    assert (pool.threads == {threading.current_thread().name}) is inline
