"""Same-host shared memory for gather answers (the pattern of Triton Inference Server's system shared memory).

The client creates a region (a file under ``/dev/shm``), names it in a ``GatherRequest.shared_memory``
target, and the shard server writes the rows straight into it: the answer carries only metadata. It works
only where client and server see the same ``/dev/shm``; :func:`probe` finds out per server, and the client
falls back to the bytes path where it fails.

Client side: :class:`Region` (one region this process owns) and :class:`RegionPool` (regions reused across
gathers). Server side: :class:`MappedRegions`, the bounded cache of regions a server has opened. Names
must start with :data:`PREFIX` and hold no ``/``, so a request only ever reaches this service's files; a
name states the process that created it, so a killed client's regions can be removed
(:func:`remove_leftovers`, a server's sweep, ``saintpipe doctor --clean``).

A server writes only into regions the requesting client registered: every target and probe carries the
random secret the region's creator wrote at :data:`SECRET_AT` of its header, compared in constant time.
Regions are mode 0600, so another client that can name a region (``ls /dev/shm``) cannot learn it.
Rows go after the :data:`HEADER_BYTES` header.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import mmap
import os
import re
import secrets
import stat
import threading
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, cast

import numpy as np

from saintpipe.core import shm_owners
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.feature_shard.parse import short_repr

log = logging.getLogger(__name__)

SHM_DIR = shm_owners.SHM_DIR
PREFIX = shm_owners.FEATURE_PREFIX
# What a request may name; names this process makes also state their owner (shm_owners.FEATURE_REGIONS).
_NAME = re.compile(re.escape(PREFIX) + r"[A-Za-z0-9_.-]{1,200}")
_REGIONS = shm_owners.FEATURE_REGIONS
_PAGE = mmap.PAGESIZE
PROBE_TOKEN_BYTES = 16
# A region's header: [0, 128) the probe's token and its reversed copy (<= 64 bytes each), [128, 160) the secret.
# Fixed, not the page size: client and server must agree on it whatever their builds.
HEADER_BYTES = 4096
SECRET_AT = 128
SECRET_BYTES = 32


def check_region_name(name: str, field: str) -> str:
    """``name`` if it is a region name this service may open, else InvalidArgument naming ``field``."""
    if not _NAME.fullmatch(name or ""):
        raise InvalidArgument(
            f"{field} {short_repr(name)} is not a saintpipe shared-memory region: expected {PREFIX!r} "
            f"followed by 1-200 of [A-Za-z0-9_.-] (a file directly under {SHM_DIR})"
        )
    return name


def check_secret(stored: bytes, given: bytes, name: str, field: str) -> None:
    """InvalidArgument unless ``given`` is the secret ``stored`` in region ``name``'s header (constant-time)."""
    # All zeros: a file nobody registered (fresh from ftruncate), whatever the request says.
    if len(stored) != SECRET_BYTES or not stored.strip(b"\0") or not hmac.compare_digest(stored, bytes(given)):
        raise InvalidArgument(
            f"{field}.secret does not match region {name!r}'s: not a region this client registered"
        )


def region_prefix(pid: int | None = None) -> str:
    """The start of every region name of process ``pid`` (default: this one): PREFIX, PID namespace, pid."""
    return f"{PREFIX}{shm_owners.pid_namespace()}-{pid or os.getpid()}-"


# A fresh region name for this process: its owner tag (namespace, pid, start time), then a random part.
region_name = _REGIONS.fresh
# The process a region name states as its creator (None for a name that states none), and whether it is
# dead: a server unlinks the regions of clients that were killed along with their resource tracker (Ray
# kills a dead worker's children).
owner_of = _REGIONS.owner_of
owner_is_dead = _REGIONS.owner_is_dead

# A region is its client's alone (servers write into it only during that client's calls), so a dead
# client's region is garbage at once: no group keeps it.
KINDS = shm_owners.FEATURE_KINDS


def remove_leftovers(directory: Path | None = None) -> list[shm_owners.ShmFile]:
    """Remove the regions of clients that died without cleaning up (their resource tracker killed too).

    Never a live process's region, nor one of another PID namespace. A shard
    server that still maps a removed region keeps its mapping until it sweeps
    (:class:`MappedRegions`); nobody reads it any more. Never raises. Returns the files removed.
    """
    return shm_owners.remove_leftovers(Path(directory or SHM_DIR), KINDS)


def _tracker(action: str, name: str) -> None:
    """Tell multiprocessing's resource tracker about a region: it unlinks leftovers if this process dies."""
    try:
        from multiprocessing import resource_tracker

        getattr(resource_tracker, action)("/" + name, "shared_memory")
    except (ImportError, OSError, ValueError, RuntimeError) as exc:  # no tracker: close()/atexit still unlink
        log.debug("resource tracker %s %s: %s", action, name, exc)


def _unlink(path: str, name: str, owner: int) -> None:
    if os.getpid() != owner:  # a forked child inherits the finalizer; the region is the parent's
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    _tracker("unregister", name)


class Region:
    """A shared-memory region this process created and owns (``/dev/shm/NAME``, read-write, mode 0600).

    Its first :data:`HEADER_BYTES` are the header (the probe's token area and
    :attr:`secret`, which requests name it with); ``size`` counts them,
    ``capacity`` is what follows. The size is reserved with
    ``posix_fallocate``, so a full ``/dev/shm`` fails here with ENOSPC
    instead of crashing a server with SIGBUS when it writes.

    Raises:
        OSError: the region cannot be created or sized (no ``/dev/shm``, no space).
    """

    def __init__(self, size: int, directory: Path = SHM_DIR) -> None:
        self.name = region_name()
        self.path = Path(directory) / self.name
        self.size = 0
        self.buf: mmap.mmap | None = None
        self.tainted = False  # a call on it failed: a server may still write to it later, so never reuse it
        self.secret = secrets.token_bytes(SECRET_BYTES)
        self._fd = os.open(
            self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        _tracker("register", self.name)
        self._finalizer = weakref.finalize(self, _unlink, str(self.path), self.name, os.getpid())
        try:
            self.ensure(size)
            self.write(SECRET_AT, self.secret)
        except BaseException:
            self.close()
            raise

    @property
    def capacity(self) -> int:
        """Bytes after the header (where rows go)."""
        return max(0, self.size - HEADER_BYTES)

    def ensure(self, size: int) -> None:
        """Grow to hold at least ``size`` bytes after the header (to the next power of two, whole pages); the
        name and the header stay."""
        if size <= self.capacity and self.buf is not None:
            return
        new = HEADER_BYTES + max(_PAGE, 1 << max(0, int(size) - 1).bit_length())
        os.ftruncate(self._fd, new)
        try:
            os.posix_fallocate(self._fd, 0, new)
        except OSError:
            os.ftruncate(self._fd, self.size)
            raise
        self.buf = mmap.mmap(self._fd, new)  # the old mapping goes when its last view does
        self.size = new

    def rows(self, n: int, dim: int, dtype: np.dtype) -> np.ndarray:
        """A writable ``[n, dim]`` array of ``dtype`` right after the header (call :meth:`ensure` first)."""
        return np.ndarray((n, dim), dtype=dtype, buffer=self.buf, offset=HEADER_BYTES)

    # The mapping exists from __init__ (ensure) to close; closed, indexing None raises TypeError.

    def write(self, offset: int, data: bytes) -> None:
        """Write ``data`` at byte ``offset`` of the file (the header included)."""
        cast(mmap.mmap, self.buf)[offset : offset + len(data)] = data

    def read(self, offset: int, length: int) -> bytes:
        return bytes(cast(mmap.mmap, self.buf)[offset : offset + length])

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        """Unlink the region and close it. Idempotent."""
        if self._fd < 0:
            return
        if self._finalizer.detach() is not None:  # not yet unlinked at exit
            _unlink(str(self.path), self.name, os.getpid())
        os.close(self._fd)
        self._fd = -1
        if self.buf is not None:
            with contextlib.suppress(BufferError):  # a view still alive: the mapping goes with it
                self.buf.close()
            self.buf = None


class RegionPool:
    """The client's regions: one leased per gather in flight, grown as needed, reused across gathers."""

    def __init__(self, directory: Path = SHM_DIR) -> None:
        self._directory = Path(directory)
        # A client starts: the regions that killed clients left behind go now, not at the next reboot.
        remove_leftovers(self._directory)
        self._free: list[Region] = []
        self._all: set[Region] = set()
        self._lock = threading.Lock()
        self._closed = False

    def acquire(self, size: int) -> Region:
        """A region of at least ``size`` bytes for one gather; hand it back with :meth:`release`.

        Raises:
            OSError: a region cannot be created or grown (no ``/dev/shm``, no space).
        """
        with self._lock:
            if self._closed:
                raise InvalidArgument("this FeatureClient is closed")
            region = self._free.pop() if self._free else None
        if region is None:
            region = Region(size, self._directory)
            with self._lock:
                self._all.add(region)
        else:
            try:
                region.ensure(size)
            except OSError:
                self.release(region, reuse=False)
                raise
        return region

    def release(self, region: Region, reuse: bool = True) -> None:
        """Hand a region back: kept for the next gather, or unlinked when ``reuse`` is false or it is
        ``tainted`` (a call on it failed, so a server may still write into it later)."""
        with self._lock:
            if reuse and not region.tainted and not self._closed:
                self._free.append(region)
                return
            self._all.discard(region)
        region.close()

    def names(self) -> list[str]:
        with self._lock:
            return sorted(r.name for r in self._all)

    def close(self) -> None:
        """Unlink every region (leased ones too: their gathers fail on a closed client anyway)."""
        with self._lock:
            self._closed = True
            regions, self._all, self._free = list(self._all), set(), []
        for region in regions:
            region.close()


def probe(ask: Callable[[str, int, bytes], Any], directory: Path = SHM_DIR) -> tuple[bool, str]:
    """Whether a server sees this process's shared memory.

    Creates a small region holding a random token, calls ``ask(region_name,
    token_length, region_secret)`` (the ProbeSharedMemory RPC) and checks that the server read
    the token and wrote it back reversed right after it. The region is unlinked
    before returning. Returns ``(ok, why not)``; RPC errors propagate.
    """
    token = secrets.token_bytes(PROBE_TOKEN_BYTES)
    try:
        region = Region(0, directory)
    except OSError as exc:
        return False, f"cannot create a region under {directory}: {exc.strerror or exc}"
    try:
        region.write(0, token)
        reply = ask(region.name, len(token), region.secret)
        if not reply.readable:
            return False, reply.detail or "the server cannot read the region"
        if reply.token != token or region.read(len(token), len(token)) != token[::-1]:
            return False, "the server read another region of the same name (not the same /dev/shm)"
        return True, ""
    finally:
        region.close()


class MappedRegions:
    """Regions a shard server has opened, by name (bounded, least recently used evicted).

    Every use re-checks the file (``fstat``): a grown region is mapped again, an
    unlinked one is dropped. Every few seconds (on a call) and on :meth:`close`
    the cache is swept: unlinked regions are dropped, so a client that went away
    does not keep its memory alive through our mapping, and regions whose owner
    process is dead (:func:`owner_is_dead`) are unlinked, the last line of
    defence when neither the client nor its resource tracker could do it.
    """

    def __init__(self, directory: Path = SHM_DIR, max_regions: int = 64, sweep_seconds: float = 5.0) -> None:
        self.directory = Path(directory)
        self._max = max_regions
        self._sweep_seconds = sweep_seconds
        self._last_sweep = time.monotonic()
        self._open: OrderedDict[str, tuple[int, mmap.mmap]] = OrderedDict()
        self._lock = threading.Lock()

    def _open_fd(self, name: str, field: str) -> int:
        path = self.directory / name
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise InvalidArgument(
                f"{field} {name!r}: cannot open {path}: {exc.strerror} (client and shard must share a host "
                "and its /dev/shm)"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InvalidArgument(f"{field} {name!r}: {path} is not a regular file")
        return fd

    def view(self, name: str, offset: int, nbytes: int, field: str, secret: bytes) -> memoryview:
        """A writable view of bytes ``[offset, offset + nbytes)`` of region ``name``, whose creator's secret
        the caller showed (``secret``).

        Raises:
            InvalidArgument: bad name, the region cannot be opened, ``secret`` is not the region's,
                ``offset`` lies in the header, or the region is smaller than ``offset + nbytes``.
        """
        check_region_name(name, f"{field}.region")
        with self._lock:
            self._maybe_sweep()
            entry = self._open.get(name)
            if entry is not None:
                st = os.fstat(entry[0])
                if st.st_nlink == 0 or st.st_size != len(entry[1]):  # unlinked (stale) or resized
                    self._drop(name)
                    entry = None
                else:
                    self._open.move_to_end(name)
            if entry is None:
                fd = self._open_fd(name, f"{field}.region")
                size = os.fstat(fd).st_size
                if size == 0:
                    os.close(fd)
                    raise InvalidArgument(f"{field}.region {name!r} is empty (0 bytes)")
                entry = (fd, mmap.mmap(fd, size))
                self._open[name] = entry
                while len(self._open) > self._max:
                    self._drop(next(iter(self._open)))
            # Under the lock: another call may evict the entry meanwhile; a view keeps its mapping open.
            mapping = memoryview(entry[1])
            stored = bytes(mapping[SECRET_AT : SECRET_AT + SECRET_BYTES])
        check_secret(stored, secret, name, field)  # before anything is written
        if offset < HEADER_BYTES:
            raise InvalidArgument(
                f"{field}.offset {offset} lies in region {name!r}'s {HEADER_BYTES}-byte header: rows start at byte "
                f"{HEADER_BYTES} or later"
            )
        if offset + nbytes > len(mapping):
            raise InvalidArgument(
                f"{field}.region {name!r} holds {len(mapping)} bytes: too small for {nbytes} bytes at "
                f"{field}.offset {offset}"
            )
        return mapping[offset : offset + nbytes]

    def probe(self, name: str, length: int, secret: bytes) -> tuple[bool, bytes, str]:
        """Read ``length`` token bytes at offset 0 and write them back reversed at ``length``, if ``secret`` is
        the region's (else not readable, nothing written: a client of an older version then uses bytes)."""
        check_region_name(name, "SharedMemoryProbe.region")
        if not 0 < length <= 64:
            raise InvalidArgument(f"SharedMemoryProbe.length {length} is not in 1..64")
        try:
            fd = self._open_fd(name, "SharedMemoryProbe.region")
        except InvalidArgument as exc:
            return False, b"", str(exc)
        try:
            try:
                check_secret(os.pread(fd, SECRET_BYTES, SECRET_AT), secret, name, "SharedMemoryProbe")
            except InvalidArgument as exc:
                return False, b"", str(exc)
            token = os.pread(fd, length, 0)
            if len(token) != length:
                return False, token, f"region {name!r} holds fewer than {2 * length} bytes"
            os.pwrite(fd, token[::-1], length)
            return True, token, ""
        finally:
            os.close(fd)

    def _maybe_sweep(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep < self._sweep_seconds:
            return
        self._last_sweep = now
        self._sweep()

    def _sweep(self) -> None:
        for name, (fd, _) in list(self._open.items()):
            if os.fstat(fd).st_nlink and owner_is_dead(name):
                log.info("unlinking shared-memory region %s: its owner process is gone", name)
                with contextlib.suppress(OSError):
                    os.unlink(self.directory / name)
            if os.fstat(fd).st_nlink == 0:
                self._drop(name)

    def _drop(self, name: str) -> None:
        fd, mapping = self._open.pop(name)
        os.close(fd)
        with contextlib.suppress(BufferError):  # a gather still writing: the mapping goes with its view
            mapping.close()

    def __len__(self) -> int:
        return len(self._open)

    def close(self) -> None:
        """Unmap every region (server shutdown), unlinking those of dead owners first."""
        with self._lock:
            self._sweep()
            for name in list(self._open):
                self._drop(name)
