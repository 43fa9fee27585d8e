"""What a job holds: its counters and sizes per group in one snapshot, its groups, and removing all of it."""

from __future__ import annotations

import itertools

from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.keys import GROUP, log
from saintpipe.services.pool.link import RedisLink
from saintpipe.services.pool.records import GroupConsumer, PoolStats
from saintpipe.services.pool.slots import ProducerSlots

from saintpipe.core.errors import InvalidArgument


class Accounting:
    """Stats and deletion of one job; ``SubgraphPool`` documents each public method.

    Args:
        capacity: the pool object's capacity (reported in stats).
        link: the pool object's round trips (and its job and keys).
        slots: the pool object's shared-memory slots (closed when the job is deleted).
    """

    def __init__(self, capacity: int, link: RedisLink, slots: ProducerSlots) -> None:
        self.job_id = link.job_id
        self.capacity = capacity
        self._keys = link.keys
        self._link = link
        self._slots = slots

    def stats(self, group: str | None = None) -> PoolStats:
        held, pending, produced, acked, redelivered, dead_lettered, waiting = (
            int(v or 0)
            for v in self._link.eval("STATS", self._keys.stats, [group or self._keys.group], "read pool stats")
        )
        return PoolStats(
            depth=waiting,
            pending=pending,
            produced=produced,
            acknowledged=acked,
            redelivered=redelivered,
            dead_lettered=dead_lettered,
            capacity=self.capacity,
        )

    def add_group(self, group: str) -> bool:
        return bool(self._link.eval("ADD_GROUP", self._keys.stats, [group], "add a consumer group"))

    def remove_group(self, group: str) -> int:
        status, detail = self._link.eval(
            "REMOVE_GROUP", self._keys.remove_group, [group], "remove a consumer group"
        )
        refused = f"pool job {self.job_id}: cannot remove consumer group {group!r}"
        if status == -1:  # not registered: detail lists those that are
            registered = ", ".join(sorted(n.decode() if isinstance(n, bytes) else str(n) for n in detail))
            if registered:
                raise InvalidArgument(
                    f"{refused}: it is not registered (registered: {registered}); nothing was changed"
                )
            raise InvalidArgument(
                f"{refused}: no group is registered (the job has only its default group {GROUP!r}, "
                "which ends with the job: delete_job); nothing was changed"
            )
        if status == -2:
            raise InvalidArgument(
                f"{refused}: it is the job's last registered group (add the next group first, or end the job "
                "with delete_job); nothing was changed"
            )
        if status == 1:
            log.info("pool job %s: group %s removed, %d entries released", self.job_id, group, detail)
        return int(detail)

    def groups(self) -> list[str]:
        client = self._link.client
        names = self._link.call(lambda: client.hkeys(self._keys.groups), "list the consumer groups")
        return sorted(n.decode() if isinstance(n, bytes) else str(n) for n in names)

    def consumers(self) -> dict[str, list[GroupConsumer]]:
        client, stream = self._link.client, self._keys.stream

        def read() -> dict[str, list[GroupConsumer]]:
            if not client.exists(stream):
                return {}
            out: dict[str, list[GroupConsumer]] = {}
            for info in client.xinfo_groups(stream):
                group = _text(info["name"])
                out[group] = [GroupConsumer(group, _text(c["name"]), int(c["idle"]) / 1000.0, int(c["pending"]))
                              for c in client.xinfo_consumers(stream, group)]
            return out

        return self._link.call(read, "list the consumers of the consumer groups")

    def delete_job(self) -> int:
        client = self._link.client

        def delete() -> int:
            removed = client.delete(*self._keys.fixed)
            uploads = client.scan_iter(match=f"{self._keys.upload_prefix}*", count=1000)
            while batch := list(itertools.islice(uploads, 1000)):
                removed += client.unlink(*batch)
            return removed

        removed = int(self._link.call(delete, "delete the job"))
        self._slots.close()  # its slots are swept below: a later put starts with new ones
        swept = shared_memory.sweep(self._link.url, self.job_id)
        if swept:
            log.info("pool job %s: removed %d shared-memory slots", self.job_id, swept)
        return removed


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
