"""The node set alone: clip and sort a sampled set without inducing it (the pool's ``nodes`` wire).

A sampler whose subgraphs travel as node sets stops here: the trainer induces
the CSR and computes the weights from its own copy of the topology
(FastSample's replicated topology), so the sampling core spends nothing on
induction, weights or encoding megabytes. The node set is exactly the
``node_ids`` that :func:`~saintpipe.services.sampler.kernels.induce.finish_subgraph`
would produce from the same selection and random state.
"""

from __future__ import annotations

from numba import njit

from saintpipe.services.sampler.kernels.induce import DENSE_WORDS_PER_NODE, clip_nodes, sorted_node_ids
from saintpipe.services.sampler.kernels.select import clear_nodes


@njit(cache=True, nogil=True)
def finish_node_set(bits, sel, count, clip_multiple, state):
    """Clip and sort the marked node set ``sel[:count]``; returns its ids (int64, ascending).

    Empties the set (``bits``), as induction would.
    """
    first = clip_nodes(state, bits, sel, count, clip_multiple)
    node_ids = sorted_node_ids(bits, sel, first, count, DENSE_WORDS_PER_NODE)
    clear_nodes(bits, node_ids)
    return node_ids
