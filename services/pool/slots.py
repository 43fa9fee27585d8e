"""A shared-memory producer's slots: writing a message into one, and learning from Redis which are free again."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.keys import FORKS, JobKeys, log
from saintpipe.services.pool.link import RedisLink
from saintpipe.services.pool.resp import pack

from saintpipe.core import shm_owners
from saintpipe.core.errors import SaintpipeError

# Oldest entries asked about along with each put (is its slot free again?), and, when no slot is free and
# _SLOTS_WITHOUT_RECLAIM exist, before creating another.
SLOT_CHECKS_PER_PUT, _SLOT_CHECKS_WHEN_SHORT = 2, 32
# Up to this many slots a producer short of a free one makes another rather than asking Redis at once:
# a pipelined producer holds one being written, one in flight and the entries whose checks are on the way.
_SLOTS_WITHOUT_RECLAIM = 8

Written = tuple[shared_memory.SlotWriter, int, bytes]  # (writer, slot, reference to put in Redis)


class ProducerSlots:
    """The slots of one pool object's puts (made on first use, and anew in a forked child).

    Args:
        url: the pool's Redis URL.
        job_id: the pool's job.
        stream_key: the job's stream (an entry gone from it frees its slot).
        link: the pool object's round trips.
    """

    def __init__(self, url: str, job_id: str, stream_key: str, link: RedisLink) -> None:
        self.url = url
        self.job_id = job_id
        self._stream_key = stream_key
        self._link = link
        self._writer: shared_memory.SlotWriter | None = None
        self._fork = -1
        self._failure_logged = False

    def write(self, encode_into: Callable[[Callable[[int], np.ndarray]], int]) -> Written | None:
        """Let ``encode_into(allocate)`` write the message into a slot.

        Returns:
            (writer, slot, reference); None when no slot could be written (``/dev/shm`` full): the
            caller puts the bytes in Redis.
        """
        writer = self._current()

        def when_short() -> None:
            if writer.slots >= _SLOTS_WITHOUT_RECLAIM:
                self._reclaim(writer, writer.oldest(_SLOT_CHECKS_WHEN_SHORT))

        try:
            slot, reference = writer.write(encode_into, when_short)
        except OSError as exc:  # ENOSPC from posix_fallocate, EMFILE, ...: nothing was put yet
            if isinstance(exc, SaintpipeError):  # Redis away while looking for free slots: not a slot problem
                raise
            if not self._failure_logged:
                self._failure_logged = True
                log.warning(
                    "pool job %s: cannot write a shared-memory slot under %s (%s); putting subgraph bytes "
                    "in Redis until a slot can be written again (raise the size of /dev/shm, or lower the "
                    "pool's capacity)", self.job_id, shared_memory.SHM_DIR, exc,
                )
            return None
        self._failure_logged = False
        return writer, slot, reference

    def _current(self) -> shared_memory.SlotWriter:
        if self._writer is None or self._fork != FORKS[0]:  # a forked child writes its own slots
            self._writer = shared_memory.SlotWriter(self.url, self.job_id)
            self._fork = FORKS[0]
            self._remove_leftovers()
        return self._writer

    def _remove_leftovers(self) -> None:
        """As a producer starts: remove the slots that producers killed earlier (SIGKILL) left in /dev/shm.

        A dead producer's slot may still be named by an entry of its job: removed, that subgraph would be
        lost (``shared_memory.read`` returns None, the consumer dead-letters the entry; a consumer
        that already opened it reads it whole, since an unlinked file stays readable through an open
        descriptor). So slots go only where no entry can name them: those of a job with a live producer
        stay (see ``shared_memory.KINDS``), and so do those of a job on this Redis server whose stream
        holds entries (this job's own: a restarted worker's predecessor). A job's slots on another server,
        which cannot be asked, go once none of its producers lives (a run killed earlier: its private
        Redis is gone too).
        """
        server = shared_memory.job_slots(self.url, "")  # the name's start shared by every job on this server
        busy: dict[str, bool] = {}
        failed: list[Exception] = []  # Redis did not answer once: not asked again (each try may wait long)

        def keep(leftover: shm_owners.ShmFile) -> bool:
            group = leftover.group or ""
            if not group.startswith(server):
                return False
            if group not in busy:
                busy[group] = bool(failed) or self._stream_busy(group[len(server):], failed)
            return busy[group]

        shared_memory.remove_leftovers(keep=keep)

    def _stream_busy(self, job_id: str, failed: list[Exception]) -> bool:
        """Whether a job's stream holds entries; True, and the error added to ``failed``, when Redis cannot
        say (keep rather than lose)."""
        stream = self._stream_key if job_id == self.job_id else JobKeys(job_id).stream
        try:
            return bool(self._link.run([pack("XLEN", stream)], "count a job's entries")[0])
        except Exception as exc:  # noqa: BLE001 - the put that follows reports Redis problems itself
            log.debug("pool job %s: cannot count job %s's entries: %s", self.job_id, job_id, exc)
            failed.append(exc)
            return True

    def _reclaim(self, writer: shared_memory.SlotWriter, entry_ids: list[str]) -> None:
        """Ask Redis which of these entries have left the stream; their slots are free again."""
        if entry_ids:
            checks = [pack("XRANGE", self._stream_key, eid, eid) for eid in entry_ids]
            replies = self._link.run(checks, "look for free shared-memory slots")
            writer.gone([eid for eid, entry in zip(entry_ids, replies) if not entry])

    def close(self) -> None:
        """Unmap the slots (see ``SlotWriter.close``); a later write starts with new ones."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
