"""The pool's same-host transport: subgraph bytes in ``/dev/shm``, a short reference in Redis.

With ``transport="shared_memory"`` a producer writes each encoded subgraph into a *slot*, a file under
``/dev/shm`` that it owns and reuses, and puts a ~100-byte reference to it where the bytes would go;
everything else is the same Redis logic, only the megabytes no longer cross a socket twice. A slot is
reused once the entry that names it has left the stream (the producer asks Redis about its oldest
outstanding entries along with its puts). A consumer copies the slot's bytes out before decoding, so a
later reuse never changes a subgraph a trainer holds; the message's checksum catches a slot rewritten
while a late consumer was still reading it.

A reference only works where producer and consumer see the same ``/dev/shm``. Each such ``/dev/shm``
carries a random identity (:func:`namespace_id`) that references name, so a consumer elsewhere gets a
:class:`ConfigError` (and leaves the entry for a consumer that can read it) instead of losing data.

Slot names: ``saintpipe-pool-<server>-<job>+<owner>-<writer>-<n>``: ``server`` hashes the Redis address,
so :func:`sweep` (``delete_job``) removes exactly one job's slots on one server; ``owner`` names the
producer process (:mod:`saintpipe.core.shm_owners`), so a killed producer's slots can be removed
(:func:`remove_leftovers`, ``saintpipe doctor --clean``; docs/explanation/shared-memory.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import mmap
import os
import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import numpy as np

from saintpipe.core import shm_owners
from saintpipe.core.errors import ConfigError, DecodeError

log = logging.getLogger(__name__)

SHM_DIR = shm_owners.SHM_DIR
PREFIX = shm_owners.POOL_PREFIX
# 0xff cannot start a protobuf message (its tag would have wire type 7), so a reference is never
# mistaken for an encoded subgraph, nor the other way round.
MAGIC = b"\xffsaintpipe-slot:"
_NAMESPACE_FILE = shm_owners.POOL_NAMESPACE_FILE
# Slot names, their owner and their job's group (sweep's glob). References are checked against them: a
# consumer opens only names a producer can have written.
_SLOTS = shm_owners.POOL_SLOTS
# Slots grow in whole pages, a quarter above the message that needed it, so sizes that vary a little
# reuse one slot without growing it again.
_GRAIN = mmap.PAGESIZE


def available(directory: Path | None = None) -> bool:
    """Whether this process can create files in the shared-memory directory."""
    directory = directory or SHM_DIR
    return directory.is_dir() and os.access(directory, os.W_OK | os.X_OK)


def require_available(directory: Path | None = None) -> None:
    """Raises ConfigError, naming the setting, when the shared-memory directory is not usable here."""
    directory = directory or SHM_DIR
    if not available(directory):
        raise ConfigError(
            f"pool.transport 'shared_memory': {directory} is missing or not writable here; "
            "use 'redis' (or 'auto', which picks it where shared memory is not usable)"
        )


def is_reference(payload: bytes | memoryview) -> bool:
    """Whether a pool payload is a slot reference rather than an encoded subgraph."""
    return bytes(payload[: len(MAGIC)]) == MAGIC


def server_tag(url: str) -> str:
    """Eight hex digits naming a Redis server (host, port, db or socket path) in slot names."""
    parts = urlsplit(url)
    where = parts.path if parts.scheme == "unix" else f"{parts.hostname}:{parts.port or 6379}{parts.path or '/0'}"
    return hashlib.blake2b(where.encode(), digest_size=4).hexdigest()


def is_local(url: str) -> bool:
    """Whether a Redis URL can only be reached from this host (loopback or a unix socket)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return True
    host = (parts.hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


_namespace: dict[Path, str] = {}


def namespace_id(directory: Path | None = None) -> str:
    """The random identity of this shared-memory directory, created by the first process that asks.

    Raises:
        OSError: the directory cannot be written.
    """
    directory = directory or SHM_DIR
    cached = _namespace.get(directory)
    if cached is not None:
        return cached
    path = directory / _NAMESPACE_FILE
    if not path.exists():
        # Written under a private name, then linked: no reader ever sees a half-written identity.
        tmp = directory / f"{_NAMESPACE_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        tmp.write_text(secrets.token_hex(16))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process won the race: use its identity
        finally:
            tmp.unlink()
    value = path.read_text().strip()
    _namespace[directory] = value
    return value


@dataclass(frozen=True)
class SlotReference:
    """What a pool entry holds in place of the bytes: where they are, and how many."""

    namespace: str
    name: str
    nbytes: int

    def encode(self) -> bytes:
        return MAGIC + f"{self.namespace} {self.name} {self.nbytes}".encode()

    @classmethod
    def parse(cls, payload: bytes | memoryview) -> SlotReference:
        """Raises DecodeError when the reference is malformed or names a file outside the pool's slots."""
        try:
            namespace, name, nbytes = bytes(payload[len(MAGIC) :]).decode("ascii").split(" ")
            size = int(nbytes)
        except (UnicodeDecodeError, ValueError):
            raise DecodeError(f"shared-memory reference {bytes(payload)[:120]!r} is malformed") from None
        if not _SLOTS.match(name) or size < 0:
            raise DecodeError(f"shared-memory reference names {name!r} ({size} bytes): not a pool slot")
        return cls(namespace, name, size)


def read(payload: bytes | memoryview, directory: Path | None = None) -> bytearray | None:
    """The bytes a reference points to, copied out of the slot; None when the slot is gone or too short.

    Raises:
        ConfigError: the slot lives in another host's (or container's) ``/dev/shm``, or another user's.
        DecodeError: the reference is malformed.
    """
    directory = directory or SHM_DIR
    ref = SlotReference.parse(payload)
    mine = _namespace.get(directory) or (namespace_id(directory) if available(directory) else "(none)")
    if ref.namespace != mine:
        raise ConfigError(
            f"pool entry's bytes are in shared-memory slot {ref.name} of another host or container "
            f"(/dev/shm {ref.namespace}, here {mine}): run this consumer where its producers run, or set "
            "pool.transport (SAINTPIPE_POOL__TRANSPORT) to 'redis' on the producers"
        )
    # A slot may vanish at any time: its job's sweep, or remove_leftovers once its producer is dead. Gone
    # before the open: None (the caller drops the entry as malformed). Gone after: the descriptor still
    # reads the whole message (unlinking frees the pages only at the last close). Slots are only ever
    # unlinked, never truncated from outside, so a short read means a damaged slot: None as well.
    try:
        fd = os.open(directory / ref.name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except PermissionError:
        raise ConfigError(
            f"pool entry's bytes are in shared-memory slot {directory / ref.name}, which this process may not "
            "read (slots are private to the user that wrote them): run producers and consumers as one user, "
            "or set pool.transport (SAINTPIPE_POOL__TRANSPORT) to 'redis' on the producers"
        ) from None
    try:
        buf = bytearray(ref.nbytes)
        got = os.preadv(fd, [buf], 0) if ref.nbytes else 0
    finally:
        os.close(fd)
    return buf if got == ref.nbytes else None


def sweep(url: str, job_id: str, directory: Path | None = None) -> int:
    """Remove every slot of one job on one Redis server (its producers and consumers have stopped)."""
    directory = directory or SHM_DIR
    if not directory.is_dir():
        return 0
    removed = 0
    # Job ids hold no glob characters (JOB_ID_PATTERN), so the id is matched literally.
    for path in directory.glob(f"{job_slots(url, job_id)}+*"):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
    return removed


def job_slots(url: str, job_id: str) -> str:
    """The part of a slot name before ``+`` that every slot of one job on one Redis server shares."""
    return f"{PREFIX}{server_tag(url)}-{job_id}"


# What remove_leftovers looks for (``saintpipe doctor`` takes them from shm_owners.KINDS). A dead producer's
# slots stay while a producer of the same job on the same server lives: the job runs, and Redis entries may
# still name them (a sampler worker that died and was restarted); the job's sweep removes them when it ends.
KINDS = shm_owners.POOL_KINDS


def remove_leftovers(directory: Path | None = None,
                     keep: Callable[[shm_owners.ShmFile], bool] | None = None) -> list[shm_owners.ShmFile]:
    """Remove the slots of producers that died without cleaning up (a SIGKILL), except those ``keep`` names.

    Never a live producer's slot, nor one of another PID namespace (a container sharing this /dev/shm),
    nor the namespace marker. Never raises. Returns the files removed.
    """
    return shm_owners.remove_leftovers(directory or SHM_DIR, KINDS, keep=keep)


class _Slot:
    """One slot file, mapped for writing and kept populated (its pages are allocated once)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self.view: np.ndarray | None = None
        self._map: mmap.mmap | None = None
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def intact(self) -> bool:
        """Whether the file is still linked at full size (nobody removed or truncated it meanwhile)."""
        st = os.fstat(self._fd)
        return st.st_nlink > 0 and st.st_size >= self.size

    def ensure(self, nbytes: int) -> np.ndarray:
        """A writable view of at least ``nbytes`` (grown, and its pages reserved, as needed)."""
        if nbytes > self.size:
            size = -(-(nbytes + nbytes // 4) // _GRAIN) * _GRAIN
            os.ftruncate(self._fd, size)
            try:
                # Reserved now: a full /dev/shm fails here with ENOSPC rather than SIGBUS on a write.
                os.posix_fallocate(self._fd, 0, size)
            except OSError:
                os.ftruncate(self._fd, self.size)  # as it was: its current mapping stays valid
                raise
            self.view = None
            if self._map is not None:
                with contextlib.suppress(BufferError):
                    self._map.close()
            self._map = mmap.mmap(self._fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
            self.view = np.frombuffer(self._map, dtype=np.uint8)
            self.size = size
        # Mapped by now for any nbytes > 0 (no caller asks for 0 bytes).
        return cast(np.ndarray, self.view)

    def close(self) -> None:
        """Unmap and close; the file stays (an entry may still name it)."""
        self.view = None
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def unlink(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class SlotWriter:
    """One producer's slots: written by its puts, reused once Redis no longer holds their entries.

    Args:
        url: the pool's Redis URL (names the server in slot names).
        job_id: the pool's job.
        directory: the shared-memory directory.

    Raises:
        ConfigError: the directory is not usable.
    """

    def __init__(self, url: str, job_id: str, directory: Path | None = None) -> None:
        directory = directory or SHM_DIR
        require_available(directory)
        self.namespace = namespace_id(directory)
        self._base = f"{job_slots(url, job_id)}+{shm_owners.current().tag}-{secrets.token_hex(4)}-"
        self._directory = directory
        self._slots: list[_Slot] = []
        self._names = itertools.count()
        self._free: list[int] = []  # slots no entry names; every other slot is being written or is named
        self._outstanding: deque[tuple[str, int]] = deque()  # (entry id, slot), oldest first
        self._lock = threading.Lock()

    def write(self, encode_into: Callable[[Callable[[int], np.ndarray]], int],
              when_short: Callable[[], None] | None = None) -> tuple[int, bytes]:
        """Let ``encode_into(allocate)`` write a message into a free slot (or a new one).

        The slot is chosen when ``encode_into`` calls ``allocate``, not before:
        a producer that learns of freed slots while it draws (its previous put
        settled meanwhile) then writes into the one it used most recently,
        still in cache, rather than into another. ``when_short()``, if given,
        runs when no slot is free, before a new one is made (the pool asks Redis
        which entries are gone there).

        Returns:
            (slot, reference): hand the slot back with :meth:`committed` or :meth:`release`.
        """
        taken: list[int] = []

        def allocate(nbytes: int) -> np.ndarray:
            if not taken:
                if when_short is not None and not self._free:
                    when_short()
                taken.append(self._take())
            return self._slots[taken[0]].ensure(nbytes)

        try:
            nbytes = encode_into(allocate)
        except BaseException:
            if taken:
                self.release(taken[0])
            raise
        if not taken:
            raise ValueError("encode_into returned without asking for its buffer")
        slot = self._slots[taken[0]]
        return taken[0], SlotReference(self.namespace, slot.path.name, nbytes).encode()

    def _take(self) -> int:
        """A free slot, the most recently freed first, or a new one."""
        with self._lock:
            index = self._free.pop() if self._free else self._new_slot()
            if not self._slots[index].intact():  # removed or cut from outside: writing there would be lost
                log.warning("pool slot %s was removed or truncated from outside; using a new file",
                            self._slots[index].path.name)
                self._slots[index].close()
                self._slots[index] = self._open_slot()
        return index

    def _new_slot(self) -> int:
        self._slots.append(self._open_slot())
        log.debug("pool slot %s created (%d slots)", self._slots[-1].path.name, len(self._slots))
        return len(self._slots) - 1

    def _open_slot(self) -> _Slot:
        return _Slot(self._directory / f"{self._base}{next(self._names)}")

    def committed(self, index: int, entry_id: str) -> None:
        """The slot's message is entry ``entry_id`` now: reuse it once that entry is gone."""
        with self._lock:
            self._outstanding.append((entry_id, index))

    def release(self, index: int) -> None:
        """The slot's message never became an entry: reuse it at once."""
        with self._lock:
            if index not in self._free:
                self._free.append(index)

    @property
    def slots(self) -> int:
        return len(self._slots)

    def oldest(self, count: int) -> list[str]:
        """The ids of up to ``count`` of the oldest entries whose slots wait to be reused."""
        with self._lock:  # not a copy of the whole queue: a full pool keeps `capacity` entries outstanding
            return [eid for eid, _ in itertools.islice(self._outstanding, count)]

    def gone(self, entry_ids: list[str]) -> None:
        """These entries have left the stream: their slots are free."""
        done = set(entry_ids)
        if not done:
            return
        with self._lock:
            # The entries asked about are the oldest ones, so those gone are usually at the front.
            while self._outstanding and self._outstanding[0][0] in done:
                done.discard(self._free_slot(*self._outstanding.popleft()))
            if not done:
                return
            keep: deque[tuple[str, int]] = deque()
            for eid, index in self._outstanding:
                if eid in done:
                    self._free_slot(eid, index)
                else:
                    keep.append((eid, index))
            self._outstanding = keep

    def _free_slot(self, entry_id: str, index: int) -> str:
        self._free.append(index)
        return entry_id

    def close(self) -> None:
        """Unmap every slot. Slots no entry names any more are removed; the others stay for their consumers
        (``delete_job`` sweeps what is left when the job ends)."""
        with self._lock:
            free = set(self._free)
            for index, slot in enumerate(self._slots):
                if index in free:
                    slot.unlink()
                else:
                    slot.close()
            self._slots, self._free = [], []
            self._outstanding.clear()
