"""How one shard call's rows reach the client: four transports behind one interface.

A gather is cut into pieces, one per shard call (:class:`Piece`: a sorted run
of ids of one shard and where their rows go in the output). For each piece the
client offers one replica the transports in order; the first that applies
fetches it:

1. :class:`SharedMemory`: the server writes the rows into this client's
   ``/dev/shm`` region and answers with metadata (same host, the replica passed
   the probe: :mod:`saintpipe.services.feature_shard.shm`);
2. :class:`Bulk`: rows on the replica's bulk data plane, received straight into
   the output when it is one block (:mod:`saintpipe.services.feature_shard.bulk_client`);
3. :class:`Unary`: one ``GatherUnary`` message, when the answer fits the
   message limit;
4. :class:`Stream`: a ``Gather`` stream of chunks, each placed as it arrives.

A transport that does not apply to a piece and replica returns False and the
next one is tried; errors (UNAVAILABLE and the like) propagate to the client's
failover (:func:`saintpipe.services.feature_shard.replicas.with_failover`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc
import numpy as np

from saintpipe.core.errors import DecodeError
from saintpipe.protos import feature_shard_pb2 as pb
from saintpipe.services.feature_shard import shm

if TYPE_CHECKING:
    from saintpipe.services.feature_shard.bulk_client import BulkChannel
    from saintpipe.services.feature_shard.replicas import Replica, Shard

Count = Callable[..., None]  # the client's counters: count(rows_fetched=..., bytes_received=..., ...)

log = logging.getLogger(__name__)


@dataclass
class Piece:
    """One shard call of a gather: ``ids`` (sorted, of one shard) whose rows go to ``out[positions]``.

    ``contiguous``: the positions are one block starting at ``base`` (a subgraph's sorted unique ids), so
    rows are copied as slices rather than scattered. ``region``: the shared-memory region ``out`` lies in
    (its rows after the header), or None.
    """

    shard: Shard
    ids: np.ndarray
    out: np.ndarray
    positions: np.ndarray
    request: pb.GatherRequest
    region: shm.Region | None = None

    def __post_init__(self) -> None:
        self.base = int(self.positions[0])
        last = int(self.positions[-1])
        self.contiguous = bool(last - self.base == self.positions.size - 1 and (np.diff(self.positions) == 1).all())

    def where(self, replica: Replica) -> str:
        return f"feature shard {self.shard.index} at {replica.address}"

    def place(self, replica: Replica, offset: int, rows: np.ndarray) -> int:
        """Copy one decoded chunk (rows of ``ids[offset:]``) into ``out``; returns its row count.

        Raises:
            DecodeError: the chunk does not fit the request (width, or rows past its end).
        """
        out, positions = self.out, self.positions
        if rows.shape[1] != out.shape[1] or offset + rows.shape[0] > self.ids.size:
            raise DecodeError(f"{self.where(replica)}: chunk of shape {rows.shape} at offset {offset} does not "
                              f"fit a request of {self.ids.size} ids")
        end = offset + rows.shape[0]
        if rows.dtype == np.float16 and out.dtype == np.float32:  # numpy's cast is slow: a Numba kernel
            from saintpipe.services.feature_shard.half import scatter_float16_rows  # loaded on first use

            where = np.arange(self.base + offset, self.base + end) if self.contiguous else positions[offset:end]
            scatter_float16_rows(rows, where, out)
        elif self.contiguous:
            out[self.base + offset : self.base + end] = rows
        elif rows.dtype == out.dtype:
            from saintpipe.services.feature_shard.scatter import scatter_rows  # Numba: loaded on first use

            scatter_rows(rows, positions[offset:end], out)
        else:
            out[positions[offset:end]] = rows
        return rows.shape[0]


class SharedMemory:
    """The server writes the rows into the client's region; the answer is metadata only.

    Args:
        takes_shm: whether a replica takes this client's regions (probed once).
        probe: probe a replica again (after it refused a region it had accepted).
        required: ``shared_memory="on"``: a refusal is an error, never a fall-back to bytes.
        count: the client's counters.
    """

    def __init__(self, takes_shm: Callable[[Shard, Replica, float], bool],
                 probe: Callable[[Shard, Replica, float], bool], required: bool, count: Count) -> None:
        self.takes_shm, self.probe, self.required, self.count = takes_shm, probe, required, count

    def fetch(self, piece: Piece, replica: Replica, timeout: float) -> bool:
        region = piece.region
        if region is None or not self.takes_shm(piece.shard, replica, timeout):
            return False
        try:
            self._write_through(piece, region, replica, timeout)
            return True
        except grpc.RpcError as exc:
            region.tainted = True  # the server may still write into the region later: never reuse it
            # A replica that passed the probe but cannot open the region now (restarted elsewhere under the
            # same address?): probe again; if it fails, this call and later ones use bytes.
            if (exc.code() != grpc.StatusCode.INVALID_ARGUMENT or self.required
                    or self.probe(piece.shard, replica, timeout)):
                raise
            return False

    def _write_through(self, piece: Piece, region: shm.Region, replica: Replica, timeout: float) -> None:
        ids, out, dim = piece.ids, piece.out, piece.out.shape[1]
        row_bytes = dim * out.dtype.itemsize
        target = pb.SharedMemoryTarget(
            region=region.name,
            offset=shm.HEADER_BYTES + piece.base * row_bytes,  # ``out`` is the rows after the region's header
            capacity=ids.size * row_bytes,
            secret=region.secret,
        )
        reply = replica.gather_shm(pb.GatherRequest(ids=piece.request.ids, transfer_dtype=piece.request.transfer_dtype,
                                                    shared_memory=target), timeout=timeout)
        if not reply.in_shared_memory or list(reply.shape) != [ids.size, dim] or reply.dtype != out.dtype.name:
            raise DecodeError(
                f"{piece.where(replica)}: asked for {ids.size} x {dim} {out.dtype.name} rows in shared memory, "
                f"answered in_shared_memory={reply.in_shared_memory} shape={list(reply.shape)} dtype={reply.dtype!r}"
            )
        self.count(rows_fetched=ids.size, shm_bytes=ids.size * row_bytes, shard_calls=1)


class Bulk:
    """Rows on the replica's bulk data plane; one block of the output is received straight into it.

    ``channel_of``: a replica's bulk channel, or None where it has none or the client does not use them.
    """

    def __init__(self, channel_of: Callable[[Replica, float], BulkChannel | None], count: Count) -> None:
        self.channel_of, self.count = channel_of, count

    def fetch(self, piece: Piece, replica: Replica, timeout: float) -> bool:
        channel = self.channel_of(replica, timeout)
        if channel is None:
            return False
        # Rows for one block of ``out`` in its dtype (sorted unique ids) are received straight into it.
        into = piece.out[piece.base : piece.base + piece.ids.size] if piece.contiguous else None
        try:
            nbytes = channel.gather(piece.ids, dim=piece.out.shape[1], float16=bool(piece.request.transfer_dtype),
                                    timeout=timeout, into=into,
                                    place=lambda offset, rows: piece.place(replica, offset, rows))
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:  # a restarted replica may have a new bulk port:
                replica.bulk, replica.bulk_port = None, None  # ask its Info again on the next try
                channel.close()
            raise
        self.count(rows_fetched=piece.ids.size, bytes_received=nbytes, shard_calls=1)
        return True


class Unary:
    """One ``GatherUnary`` message, when the answer fits the smallest server's message limit.

    ``max_rows``: the most rows one message answers (known once the shards' Info has been read).
    """

    def __init__(self, max_rows: Callable[[], int], count: Count) -> None:
        self.max_rows, self.count = max_rows, count

    def fetch(self, piece: Piece, replica: Replica, timeout: float) -> bool:
        if not replica.has_unary or piece.ids.size > self.max_rows():
            return False
        try:
            chunk = replica.gather_unary(piece.request, timeout=timeout)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            log.info("%s: no GatherUnary; streams", piece.where(replica))
            replica.has_unary = False
            return False
        place_chunks(piece, replica, [chunk], self.count)
        return True


class Stream:
    """A ``Gather`` stream of chunks, each placed as it arrives: any answer size, any server."""

    def __init__(self, count: Count) -> None:
        self.count = count

    def fetch(self, piece: Piece, replica: Replica, timeout: float) -> bool:
        place_chunks(piece, replica, replica.gather(piece.request, timeout=timeout), self.count)
        return True


def place_chunks(piece: Piece, replica: Replica, chunks: Iterable[tuple[int, np.ndarray]], count: Count) -> None:
    """Place every ``(offset, rows)`` chunk of an answer; the answer must cover the piece exactly.

    Raises:
        DecodeError: it answered more or fewer rows than asked for, or a chunk does not fit.
    """
    received = nbytes = 0
    for offset, rows in chunks:
        received += piece.place(replica, offset, rows)
        nbytes += rows.nbytes
    if received != piece.ids.size:
        raise DecodeError(f"{piece.where(replica)}: answered {received} rows for {piece.ids.size} ids")
    count(rows_fetched=received, bytes_received=nbytes, shard_calls=1)
