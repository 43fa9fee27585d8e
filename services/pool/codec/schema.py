"""The ``Subgraph`` message as the codec writes and reads it: version, field numbers, wire dtypes, checksum.

Shared by the encoder (:mod:`saintpipe.services.pool.codec`) and the decoder
(:mod:`saintpipe.services.pool.codec.decoder`); the schema itself is
protos/saintpipe/protos/subgraph.proto.
"""

from __future__ import annotations

import struct

import numpy as np
import xxhash

from saintpipe.core.errors import InvalidArgument

FORMAT_VERSION = 1
# The compact form: the node set and how to induce it (services/pool/codec/compact.py).
COMPACT_VERSION = 2
ALIGN = 8  # each array's data starts a multiple of this many bytes from the message start

# Array fields: name -> (field number in Subgraph, the one dtype it travels as).
ARRAYS: dict[str, tuple[int, np.dtype]] = {
    "node_ids": (6, np.dtype("<i8")),
    "indptr": (7, np.dtype("<i8")),
    "indices": (8, np.dtype("<i4")),
    "edge_weights": (9, np.dtype("<f4")),
    "edge_weights_t": (10, np.dtype("<f4")),
    "loss_weights": (11, np.dtype("<f4")),
}
INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)


def checked_meta(job_id: object, worker: object, sequence: object, seed: object) -> tuple[str, int, int, int]:
    """The metadata (job id, worker, sequence, seed) of a message to encode; InvalidArgument naming a field that
    is not a string or an integer in range."""
    numbers: list[int] = []
    for name, value, (lo, hi) in (("worker", worker, INT64), ("sequence", sequence, INT64), ("seed", seed, UINT64)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= int(value) <= hi:
            raise InvalidArgument(f"subgraph {name}: {value!r} is not an integer in [{lo}, {hi}]")
        numbers.append(int(value))
    if not isinstance(job_id, str):
        raise InvalidArgument(f"subgraph job_id: expected a string, got {type(job_id).__name__}")
    return job_id, numbers[0], numbers[1], numbers[2]


def checksum(version: int, meta: tuple[str, int, int, int], arrays: dict[str, np.ndarray]) -> int:
    """XXH3-64 over version, ids (job, worker, sequence, seed), then each array's dtype, length and bytes.

    The padding is not covered; the arrays must have their wire dtypes.
    """
    job = meta[0].encode("utf-8")
    h = xxhash.xxh3_64(struct.pack("<IQqqQ", version, len(job), meta[1], meta[2], meta[3]) + job)
    for name, dtype_key in _HASH_DTYPES.items():
        arr = arrays[name]
        h.update(dtype_key + arr.size.to_bytes(8, "little"))
        h.update(arr)  # type: ignore[arg-type]  # numpy types ndarray as a Buffer on Python 3.12+ only
    return h.intdigest()


def checksum_nodes(meta: tuple[str, int, int, int], count: int, first: int, gap_bytes: int,
                   gaps: bytes | memoryview, induction: tuple[int, int, str, int, int, str]) -> int:
    """XXH3-64 of a version-2 message: the ids as in :func:`checksum`, the node set, then the induction.

    ``induction`` is (graph_nodes, graph_edges, normalization, norm_subgraphs, norm_seed, train_nodes);
    strings are hashed as their length and UTF-8 bytes.
    """
    job = meta[0].encode("utf-8")
    h = xxhash.xxh3_64(struct.pack("<IQqqQ", COMPACT_VERSION, len(job), meta[1], meta[2], meta[3]) + job)
    h.update(struct.pack("<qqIQ", count, first, gap_bytes, len(gaps)))
    h.update(gaps)
    graph_nodes, graph_edges, normalization, norm_subgraphs, norm_seed, train_nodes = induction
    norm, train = normalization.encode("utf-8"), train_nodes.encode("utf-8")
    h.update(struct.pack("<qqQ", graph_nodes, graph_edges, len(norm)) + norm)
    h.update(struct.pack("<qQQ", norm_subgraphs, norm_seed, len(train)) + train)
    return h.intdigest()


# struct "<4s" of each wire dtype string (the arrays hashed always have their wire dtype).
_HASH_DTYPES = {name: dtype.str.encode().ljust(4, b"\0") for name, (_, dtype) in ARRAYS.items()}
