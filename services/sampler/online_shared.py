"""Online normalization shared by the sampler workers of one host: one copy of the coefficients and counts.

With private state (:class:`~saintpipe.services.sampler.online.OnlineNormalization`) every worker holds
its own per-edge coefficients and counts, 8 bytes per edge: more than the graph's CSR. Here one file under
``/dev/shm`` holds them for every worker on the host:

* the sampler service's supervisor creates it (:meth:`SharedOnlineState.create`) from the prior, names it
  in the :class:`~saintpipe.services.sampler.coefficients.Normalization` it hands the workers, refreshes
  the coefficients from the summed counts (:class:`OnlineRefresher`, a private sampler's estimator and
  schedule), and unlinks the file when it stops;
* each worker maps it (:meth:`SharedOnlineState.attach`), reads the coefficients for every subgraph and
  adds each subgraph's counts under an exclusive ``flock`` (:class:`SharedOnlineCounts`). A worker that
  cannot see the file keeps private state instead.

Why this is sound: counts add, so W workers' summed counts are those of one sampler that produced all
their subgraphs. A refresh may read counts being added to (each int32 whole, counts only grow): it sees
a state between two subgraphs, which the next refresh corrects. Coefficients are rewritten in place, each
element once with its final value, so a subgraph weighted during a refresh may mix two estimates of the
same law.

A file's name states its creator (:mod:`saintpipe.core.shm_owners`): the file of a supervisor killed with
SIGKILL is removed by the next service that starts and by ``saintpipe doctor --clean``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from saintpipe.core import shm_owners
from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.online import DEFAULT_MAX_INTERVAL, OnlineNormalization, count_subgraph

__all__ = ["KINDS", "PREFIX", "OnlineRefresher", "SharedOnlineCounts", "SharedOnlineState", "remove_leftovers"]

log = logging.getLogger(__name__)

SHM_DIR = shm_owners.SHM_DIR
PREFIX = shm_owners.ONLINE_PREFIX
_STATES = shm_owners.ONLINE_STATES
_MAGIC = 0x31_4E_4F_54_4E_49_41_53  # "SAINTON1", little-endian
_HEADER_BYTES = 4096
# The header's int64 fields.
_F_MAGIC, _F_NODES, _F_EDGES, _F_SUBGRAPHS, _F_MAX, _F_CONVERGED, _F_REFRESHES = range(7)

# One file per sampler service, its workers' only while the service lives: a dead owner's file is garbage.
KINDS = shm_owners.ONLINE_KINDS


def remove_leftovers(directory: Path | None = None) -> list[shm_owners.ShmFile]:
    """Remove the files of services that died without unlinking theirs. Never raises."""
    return shm_owners.remove_leftovers(Path(directory or SHM_DIR), KINDS)


def _layout(num_nodes: int, num_edges: int) -> tuple[dict[str, tuple[int, type, int]], int]:
    """Each array's (offset, dtype, length), 64-byte aligned after the header; and the file's size."""
    arrays: dict[str, tuple[int, type, int]] = {}
    offset = _HEADER_BYTES
    for name, dtype, length in (("loss", np.float32, num_nodes), ("node_counts", np.int32, num_nodes),
                                ("alpha", np.float32, num_edges), ("edge_counts", np.int32, num_edges)):
        arrays[name] = (offset, dtype, length)
        offset += -(-length * np.dtype(dtype).itemsize // 64) * 64
    return arrays, offset


class SharedOnlineState:
    """One mapped state file: the header and the arrays ``loss``, ``node_counts``, ``alpha``, ``edge_counts``."""

    # Views of the mapping, set from the file's layout (None after close, when they are invalid).
    header: np.ndarray
    loss: np.ndarray
    node_counts: np.ndarray
    alpha: np.ndarray
    edge_counts: np.ndarray
    _map: np.memmap[Any, np.dtype[np.uint8]] | None

    def __init__(self, path: Path, num_nodes: int, num_edges: int) -> None:
        self.path = path
        arrays, size = _layout(num_nodes, num_edges)
        self._fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(self._fd).st_size != size:
                raise InvalidArgument(f"{path}: {os.fstat(self._fd).st_size} bytes, a state of {num_nodes} nodes "
                                      f"and {num_edges} edges has {size}")
            self._map = np.memmap(path, dtype=np.uint8, mode="r+", shape=(size,))
        except BaseException:
            os.close(self._fd)
            raise
        self.header = self._map[:_HEADER_BYTES].view(np.int64)
        for name, (offset, dtype, length) in arrays.items():
            view: np.ndarray = self._map[offset:offset + length * np.dtype(dtype).itemsize].view(dtype)
            setattr(self, name, view)
        self._thread_lock = threading.Lock()  # flock is per open file: it does not exclude this process's threads

    @property
    def name(self) -> str:
        return self.path.name

    @classmethod
    def create(cls, prior_loss: np.ndarray, prior_alpha: np.ndarray, max_subgraphs: int,
               directory: Path | None = None) -> SharedOnlineState:
        """A new state file (mode 0600) holding the prior and zero counts, named for this process."""
        directory = Path(directory or SHM_DIR)
        num_nodes, num_edges = int(prior_loss.size), int(prior_alpha.size)
        arrays, size = _layout(num_nodes, num_edges)
        path = directory / _STATES.fresh()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            # Allocated now, not on first touch: /dev/shm too small for it (a container's shm_size) is ENOSPC
            # here, where a sparse file would kill its first writer with SIGBUS. Zero-filled: counts start at 0.
            os.posix_fallocate(fd, 0, size)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        os.close(fd)
        try:
            state = cls(path, num_nodes, num_edges)
            state.loss[:] = prior_loss
            state.alpha[:] = prior_alpha
            state.header[[_F_NODES, _F_EDGES, _F_MAX]] = num_nodes, num_edges, max_subgraphs
            state.header[_F_MAGIC] = _MAGIC  # last: a file is complete once it has its magic
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return state

    @classmethod
    def attach(cls, name: str, num_nodes: int, num_edges: int,
               directory: Path | None = None) -> SharedOnlineState | None:
        """Map the state file ``name``; None when this host has no such file (the workers' fallback).

        Raises:
            InvalidArgument: a file of that name that is not a complete state of this graph's size.
        """
        if not _STATES.match(name):
            raise InvalidArgument(f"{name!r} is not an online normalization state file")
        path = Path(directory or SHM_DIR) / name
        try:
            state = cls(path, num_nodes, num_edges)
        except FileNotFoundError:
            return None
        if state.header[_F_MAGIC] != _MAGIC or tuple(state.header[[_F_NODES, _F_EDGES]]) != (num_nodes, num_edges):
            state.close()
            raise InvalidArgument(f"{path}: not a complete online normalization state of {num_nodes} nodes and "
                                  f"{num_edges} edges")
        return state

    @property
    def subgraphs(self) -> int:
        """Subgraphs counted so far, by every worker."""
        return int(self.header[_F_SUBGRAPHS])

    @property
    def max_subgraphs(self) -> int:
        return int(self.header[_F_MAX])

    @property
    def converged(self) -> bool:
        """Whether the counting is over (``max_subgraphs`` counted)."""
        return bool(self.header[_F_CONVERGED])

    @property
    def refreshes(self) -> int:
        return int(self.header[_F_REFRESHES])

    def count(self, node_ids: np.ndarray, eids: np.ndarray) -> bool:
        """Add one subgraph's counts, under the file's lock; False once counting is over."""
        with self._thread_lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                if self.header[_F_CONVERGED]:
                    return False
                count_subgraph(self.node_counts, self.edge_counts, node_ids, eids)
                self.header[_F_SUBGRAPHS] += 1
                if 0 < self.header[_F_MAX] <= self.header[_F_SUBGRAPHS]:
                    self.header[_F_CONVERGED] = 1
                return True
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Unmap and close (the arrays of this object are invalid afterwards)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            mm = getattr(self._map, "_mmap", None)
            self.header = self.loss = self.node_counts = self.alpha = self.edge_counts = None  # type: ignore[assignment]
            if mm is not None:
                with contextlib.suppress(BufferError):  # a view still exported (a sampler's array): GC unmaps
                    mm.close()
            self._map = None

    def unlink(self) -> None:
        self.path.unlink(missing_ok=True)


class SharedOnlineCounts:
    """A worker's side of the shared state: counts each produced subgraph (the interface of
    :class:`~saintpipe.services.sampler.online.OnlineNormalization` that a sampler uses)."""

    def __init__(self, state: SharedOnlineState) -> None:
        self.state = state
        self.alpha, self.loss = state.alpha, state.loss

    def observe(self, node_ids: np.ndarray, eids: np.ndarray) -> bool:
        """Count one subgraph; never refreshes here (the supervisor does), so always False."""
        if not self.state.converged:  # unlocked read first: after convergence no lock is taken at all
            self.state.count(node_ids, eids)
        return False

    @property
    def converged(self) -> bool:
        return self.state.converged

    @property
    def subgraphs(self) -> int:
        return self.state.subgraphs


class OnlineRefresher:
    """The supervisor's side: a thread that recomputes the shared coefficients from the shared counts.

    The schedule is a private sampler's (after 1, 2, 4, ... subgraphs, then every ``max_interval``), on
    the subgraphs of every worker, polled every ``poll_s``; the final refresh follows convergence.
    """

    def __init__(self, state: SharedOnlineState, indptr: np.ndarray, prior_loss: np.ndarray,
                 prior_alpha: np.ndarray, train_mask: np.ndarray, strength: float,
                 max_interval: int = DEFAULT_MAX_INTERVAL, poll_s: float = 0.05) -> None:
        self.state = state
        self.estimator = OnlineNormalization(indptr, prior_loss, prior_alpha, train_mask, strength,
                                             max_interval=max_interval, max_subgraphs=state.max_subgraphs,
                                             arrays=(state.loss, state.alpha, state.node_counts, state.edge_counts))
        self.poll_s = poll_s
        self._next = 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="online-normalization", daemon=True)

    def start(self) -> OnlineRefresher:
        self._thread.start()
        return self

    def refresh_if_due(self) -> bool:
        """One poll: refresh when the schedule says so; True when it refreshed."""
        counted, converged = self.state.subgraphs, self.state.converged
        if converged and self.estimator.subgraphs == counted:
            return False  # the final coefficients are in place
        if counted < self._next and not converged:
            return False
        self.estimator.subgraphs = counted
        self.estimator.refresh()
        self.state.header[_F_REFRESHES] = self.estimator.refreshes
        self._next = counted + min(counted, self.estimator.max_interval)
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.refresh_if_due()
            except Exception:  # noqa: BLE001 - a failed refresh keeps the last coefficients; the run goes on
                log.exception("online normalization: refreshing the shared coefficients failed")
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
