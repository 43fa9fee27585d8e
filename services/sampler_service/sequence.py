"""Per-worker sequence numbers that survive restarts, kept in Redis beside the job's pool.

A worker reserves each sequence number *before* it draws the subgraph
(``HINCRBY``), so a worker killed between reserving and pushing leaves a gap,
never a duplicate: the restarted worker continues after the last number any
incarnation reserved. One hash per job holds a field per worker index.
"""

from __future__ import annotations

import redis

from saintpipe.errors import ServiceUnavailable


def cursor_key(job_id: str) -> str:
    """The Redis hash holding the next sequence number of each worker of ``job_id``."""
    return f"saintpipe:samplers:{job_id}:next_sequence"


class SequenceCursor:
    """Hands out a worker's sequence numbers: 0, 1, 2, ... across restarts.

    Example:
        >>> cursor = SequenceCursor(redis.Redis.from_url(url), "job", worker=3)  # doctest: +SKIP
        >>> cursor.reserve()  # doctest: +SKIP
        0
    """

    def __init__(self, client: redis.Redis, job_id: str, worker: int) -> None:
        self._client = client
        self._key = cursor_key(job_id)
        self._field = str(worker)

    def reserve(self) -> int:
        """Reserve and return the next sequence number."""
        try:
            return int(self._client.hincrby(self._key, self._field, 1)) - 1
        except redis.RedisError as exc:
            raise ServiceUnavailable(f"redis: cannot reserve a sequence number for {self._key}: {exc}") from exc

    def peek(self) -> int:
        """The next number ``reserve`` would return (0 for a new worker)."""
        value = self._client.hget(self._key, self._field)
        return int(value) if value is not None else 0


def delete_cursors(client: redis.Redis, job_id: str) -> None:
    """Forget every worker's sequence of ``job_id`` (when the job itself is deleted)."""
    client.delete(cursor_key(job_id))
