"""Per-worker sequence numbers that survive restarts, kept in the job's Redis.

A worker reserves sequence numbers *before* it draws the subgraphs (``HINCRBY``
by a block of ``block`` numbers, one round trip per block), so a worker killed
before pushing them leaves gaps (at most a block), never a duplicate: the
restarted worker continues after the last number any incarnation reserved.
One hash per job holds a field per worker index. (A Redis restart without
persistence loses it together with the pool itself.)
"""

from __future__ import annotations

from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.pool.connection import ReconnectPolicy, call_with_reconnect, make_client


def cursor_key(job_id: str) -> str:
    """The Redis hash holding the next sequence number of each worker of ``job_id``."""
    return f"saintpipe:samplers:{{{job_id}}}:next_sequence"


def delete_sequences(pool: PoolConfig) -> int:
    """Forget every worker's sequence numbers of the job (with its pool, when a job id is reused).

    Returns:
        The number of Redis keys removed (0 or 1).
    """
    if pool.url is None:
        raise ValueError("delete_sequences needs the pool's Redis URL")
    client = make_client(pool.url, socket_timeout=pool.socket_timeout)
    policy = ReconnectPolicy(pool.reconnect_initial_backoff, pool.reconnect_max_backoff, pool.reconnect_timeout)
    try:
        return int(call_with_reconnect(lambda: client.delete(cursor_key(pool.job_id)), url=pool.url, policy=policy,
                                       what=f"delete {cursor_key(pool.job_id)}"))
    finally:
        client.close()


class SequenceCursor:
    """Hands out a worker's sequence numbers 0, 1, 2, ... across restarts.

    Args:
        pool: the job's pool settings (Redis URL, job id, reconnect policy).
        worker: the worker index.

    Example:
        >>> cursor = SequenceCursor(PoolConfig(url=url, job_id="job"), worker=3)  # doctest: +SKIP
        >>> cursor.reserve(), cursor.reserve()
        (0, 1)
        >>> SequenceCursor(PoolConfig(url=url, job_id="job"), worker=3).reserve()  # a restart: a new block
        16
    """

    def __init__(self, pool: PoolConfig, worker: int, block: int = 16) -> None:
        if block < 1:
            raise ValueError(f"block must be >= 1, got {block}")
        if pool.url is None:
            raise ValueError("SequenceCursor needs the pool's Redis URL")
        self._url = pool.url
        self._client = make_client(pool.url, socket_timeout=pool.socket_timeout)
        self._policy = ReconnectPolicy(pool.reconnect_initial_backoff, pool.reconnect_max_backoff,
                                       pool.reconnect_timeout)
        self._key = cursor_key(pool.job_id)
        self._field = str(worker)
        self._block = block
        self._next = self._end = 0  # the reserved block [next, end), empty at first

    def reserve(self) -> int:
        """Return the next sequence number (reserving a new block in Redis when this one is used up).

        Raises:
            ServiceUnavailable: Redis unreachable past the reconnect deadline.
        """
        if self._next == self._end:
            end = int(call_with_reconnect(lambda: self._client.hincrby(self._key, self._field, self._block),
                                          url=self._url, policy=self._policy,
                                          what=f"reserve sequence numbers in {self._key}"))
            self._next, self._end = end - self._block, end
        self._next += 1
        return self._next - 1

    def peek(self) -> int:
        """The number the next ``reserve`` returns (0 for a new worker)."""
        if self._next < self._end:
            return self._next
        value = call_with_reconnect(lambda: self._client.hget(self._key, self._field), url=self._url,
                                    policy=self._policy, what=f"read {self._key}")
        return int(value) if value is not None else 0

    def close(self) -> None:
        self._client.close()
