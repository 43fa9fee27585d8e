"""Sequence numbers in Redis: continued by a new incarnation, independent per worker and job."""

from __future__ import annotations

from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.pool.connection import make_client
from saintpipe.services.sampler_service.sequence import SequenceCursor, cursor_key, delete_sequences


def test_cursor_continues_after_a_restart_and_never_repeats(redis_server_session):
    pool = PoolConfig(url=redis_server_session.url, job_id="seq-job")
    first = SequenceCursor(pool, worker=0, block=4)
    assert first.peek() == 0
    assert [first.reserve() for _ in range(6)] == [0, 1, 2, 3, 4, 5]
    assert first.peek() == 6
    restarted = SequenceCursor(pool, worker=0, block=4)  # the old process reserved up to 7
    assert restarted.peek() == 8
    assert [restarted.reserve() for _ in range(3)] == [8, 9, 10]
    other_worker = SequenceCursor(pool, worker=1, block=4)
    other_job = SequenceCursor(PoolConfig(url=redis_server_session.url, job_id="seq-job-2"), worker=0)
    assert other_worker.reserve() == 0 and other_job.reserve() == 0
    make_client(redis_server_session.url).delete(cursor_key("seq-job"), cursor_key("seq-job-2"))


def test_delete_sequences_starts_the_job_afresh_and_leaves_other_jobs(redis_server_session):
    pool = PoolConfig(url=redis_server_session.url, job_id="seq-del")
    other = PoolConfig(url=redis_server_session.url, job_id="seq-del-other")
    SequenceCursor(pool, worker=0, block=4).reserve()
    SequenceCursor(other, worker=0, block=4).reserve()
    assert delete_sequences(pool) == 1
    assert delete_sequences(pool) == 0  # nothing left to remove
    assert SequenceCursor(pool, worker=0, block=4).reserve() == 0
    assert SequenceCursor(other, worker=0, block=4).peek() == 4
    make_client(redis_server_session.url).delete(cursor_key("seq-del"), cursor_key("seq-del-other"))
