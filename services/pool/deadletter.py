"""A job's dead-letter stream: entries moved out of the way instead of failing their trainers, and reading them.

An entry that cannot be trained on (it does not decode, its bytes or its
shared-memory slot are gone, or it has been delivered more than
``max_deliveries`` times without an acknowledgement: it probably crashes the
trainers that take it) is removed from the job's stream by the ``DEAD`` script
and recorded in ``saintpipe:pool:{JOB}:dead``, capped at about ``limit``
records. A consumer then goes on to the next entry.
"""

from __future__ import annotations

from typing import cast

import redis
from saintpipe.services.pool.keys import GROUP, log
from saintpipe.services.pool.link import RedisLink
from saintpipe.services.pool.records import DeadLetter

# A reason is a decoder's or the pool's message; keep the record small whatever it says.
_MAX_REASON = 500


class DeadLetters:
    """The dead-letter stream of one job, seen by one pool object.

    Args:
        link: the pool object's round trips (and its job and keys).
        limit: about how many records the stream keeps (older ones are trimmed).
    """

    def __init__(self, link: RedisLink, limit: int) -> None:
        self.job_id = link.job_id
        self._keys = link.keys
        self._link = link
        self._limit = limit

    def move(self, consumer: str, entry_id: str, reason: str, deliveries: int) -> bool:
        """Move an entry ``consumer`` holds to the dead-letter stream; False if it no longer holds it.

        Logs one warning per entry moved (only the consumer that moved it logs).
        """
        reason = reason[:_MAX_REASON]
        moved = self._link.eval(
            "DEAD",
            self._keys.entry_and_dead,
            [self._keys.group, consumer, self._limit, entry_id, reason, deliveries],
            "dead-letter an entry",
        )
        if moved:
            log.warning(
                "pool job %s: entry %s moved to the dead-letter stream %s (consumer %s, %d deliveries): %s",
                self.job_id, entry_id, self._keys.dead, consumer, deliveries, reason,
            )
        else:  # another consumer took it over meanwhile (it deals with it), or it was acknowledged
            log.debug("pool job %s: entry %s was no longer held by %s", self.job_id, entry_id, consumer)
        return bool(moved)

    def read(self, count: int) -> list[DeadLetter]:
        """The newest ``count`` records, oldest first."""
        client = self._link.client
        try:
            rows = self._link.call(lambda: client.xrevrange(self._keys.dead, count=count), "read dead letters")
        except redis.ResponseError as exc:
            if str(exc).startswith("WRONGTYPE"):
                raise self._link.wrong_type(self._keys.dead, "stream") from None
            raise
        # The client does not decode replies: ids, field names and values are bytes (redis-py's annotations
        # allow str and None too).
        records = [{k.decode(): v.decode(errors="replace") for k, v in fields.items()}
                   for _, fields in reversed(cast(list[tuple[bytes, dict[bytes, bytes]]], rows))]
        return [DeadLetter(entry_id=r.get("id", ""), reason=r.get("reason", ""), consumer=r.get("consumer", ""),
                           deliveries=int(r.get("deliveries", 0)), time=float(r.get("time", 0.0)),
                           group=r.get("group", GROUP)) for r in records]
