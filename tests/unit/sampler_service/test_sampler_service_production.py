"""The production loop's logic, pushing on a helper thread or pipelined on the drawing thread (fake pool and
cursor)."""

from __future__ import annotations

import threading
import time

import pytest

from saintpipe.core.errors import SaintpipeTimeout, ServiceUnavailable
from saintpipe.services.pool.synthetic import random_subgraph
from saintpipe.services.sampler.parallel import subgraph_seed
from saintpipe.services.sampler_service.production import Producer


class Sampler:
    def __init__(self, log: list | None = None, fail_at: int | None = None) -> None:
        self.log, self.fail_at, self.draws = log, fail_at, 0

    def sample(self, seed: int):
        if self.draws == self.fail_at:
            raise RuntimeError("kernel failed")
        if self.log is not None:
            self.log.append(f"draw {self.draws}")
        self.draws += 1
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
                 transport: str = "redis", log: list | None = None) -> None:
        self.stop, self.stop_after, self.full_for, self.fail = stop, stop_after, full_for, fail
        self.transport = transport
        self.taken: list = []
        self.threads: set[str] = set()
        self.log = log if log is not None else []
        self.pending = None
        self.abandoned: list = []

    # The pipelined pair, as SubgraphPool has it: a put sent now, its answer taken later.
    def put_nowait(self, sg) -> None:
        assert self.pending is None, "put_nowait before the previous one was settled"
        self.threads.add(threading.current_thread().name)
        self.log.append(f"send {sg.sequence}")
        self.pending = sg

    def settle(self, timeout: float | None = None) -> str | None:
        if self.pending is None:
            return None
        self.log.append(f"settle {self.pending.sequence}")
        entry = self.put(self.pending, timeout)  # a timeout leaves it pending
        self.pending = None
        return entry

    def abandon(self) -> str | None:
        self.abandoned.append(self.pending)
        self.pending = None
        return None

    @property
    def unsettled(self) -> bool:
        return self.pending is not None

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


def produce(pool: Pool, inline: bool | None, start: int = 0, sampler: Sampler | None = None) -> Producer:
    producer = Producer(sampler or Sampler(), pool, Cursor(start), job_id="job", worker=3, job_seed=7,
                        push_poll_s=0.01, inline=inline)
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


def test_pipelined_puts_overlap_the_next_draw():
    """Inline, subgraph k is sent before k+1 is drawn and settled only after: Redis works during the draw."""
    log: list = []
    pool = Pool(threading.Event(), 3, log=log)
    produce(pool, True, sampler=Sampler(log))
    assert log == ["draw 0", "send 0", "draw 1", "settle 0", "send 1", "draw 2", "settle 1", "send 2",
                   "draw 3", "settle 2"]
    assert [sg.sequence for sg in pool.taken] == [0, 1, 2] and pool.pending is None


def test_a_failed_draw_abandons_the_put_in_flight():
    pool = Pool(threading.Event(), 10)
    with pytest.raises(RuntimeError, match="kernel failed"):
        produce(pool, True, sampler=Sampler(fail_at=2))
    assert [sg.sequence for sg in pool.taken] == [0]  # settled after draw 1
    assert [sg.sequence for sg in pool.abandoned] == [1] and not pool.unsettled


def test_seeds_are_derived_per_block_and_match_subgraph_seed():
    pool = Pool(threading.Event(), 40)
    produce(pool, True, start=7)
    assert [sg.seed for sg in pool.taken] == [subgraph_seed(7, 3, s) for s in range(7, 47)]
