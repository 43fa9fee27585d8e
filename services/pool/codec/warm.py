"""The codec's compiled kernels, compiled (or loaded from Numba's cache) before the first message needs them.

A run whose kernel cache is cold compiles the codec in the sampler worker, as it seals its first subgraph, and
then in the trainer, as it decodes it: about 10 s on 2 cores, one after the other, on the first subgraph's way to
the trainer. :func:`compile_codec` takes the same compiled paths (a message framed in place, sealed with and
without the checks, then decoded) on a three-node subgraph, with the array types those paths see, so that a
process started beside the run (:mod:`saintpipe.pipeline.precompile`) fills the cache while the sampler worker
compiles its own kernels.
"""

from __future__ import annotations

import numpy as np

from saintpipe.services.pool.codec import DIRECT_AVAILABLE, MessageFramer, seal_subgraph
from saintpipe.services.pool.codec.compact import decode_entry


def compile_codec() -> None:
    """Frame, seal and decode a small subgraph through every compiled path of the local run's pool."""
    if not DIRECT_AVAILABLE:  # no compiled codec to compile
        return
    framer = MessageFramer("warm-up", 0)
    for validate in (True, False):  # the producer checks one message in every few: two kernels
        framed = framer.frame(lambda size: np.zeros(size, dtype=np.uint8), 3, 4, sequence=1, seed=1)
        node_ids, indptr, indices, weights, weights_t, loss_weights = framed.arrays
        node_ids[:] = (0, 1, 2)
        indptr[:] = (0, 2, 3, 4)
        indices[:] = (1, 2, 0, 0)
        for values in (weights, weights_t, loss_weights):
            values[:] = 1.0
        size = seal_subgraph(framed, validate=validate)
        decode_entry(bytes(framed.buffer[:size]))
