"""``saintpipe bench sampler-service``, the wire's side: bytes and the trainer's work, whole vs node set.

With the pool's ``wire = "nodes"`` a worker sends the node set and the
trainer induces it again (:class:`saintpipe.minibatch.expand.SubgraphExpander`):
the bytes and the sampler's work shrink, the trainer's work grows. This
measures both sides on the same subgraphs, in the benchmark's process, pinned
to one core as the plain loop is: the encoded size of each form, and what a
trainer spends per subgraph to get a whole one back (decoding it, or decoding
the node set and expanding it), in interleaved rounds after a discarded
warm-up round. It also checks that the expanded subgraph equals the whole
one, array for array.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, cast


def wire_figures(sampler: Any, dataset: Any, normalization: Any, job_seed: int, *, count: int = 16,
                 rounds: int = 3) -> dict[str, Any]:
    """Sizes and trainer-side costs of ``count`` subgraphs of ``sampler`` in both wire forms.

    Returns:
        ``bytes_full``, ``bytes_nodes`` (mean encoded bytes a subgraph), ``decode_full_ms``,
        ``expand_nodes_ms`` (median over ``rounds`` of the mean ms a subgraph) with their lowest and
        highest rounds (``*_range``), ``nodes_encode_ms`` (the worker's encoding of a node set), and
        ``expanded_equal`` (every expanded subgraph equals its whole form).
    """
    from saintpipe.core.subgraph import SubgraphNodes
    from saintpipe.minibatch.expand import SubgraphExpander
    from saintpipe.services.pool.codec import decode_subgraph, encode_subgraph
    from saintpipe.services.pool.codec.compact import decode_entry, encode_nodes
    from saintpipe.services.sampler.parallel import subgraph_seeds
    from saintpipe.services.sampler_service.worker import induction_for

    induction = induction_for(dataset, normalization)
    seeds = subgraph_seeds(job_seed, 1, 0, count)  # worker 1's first subgraphs: not the plain loop's
    wholes = [sampler.sample(seed) for seed in seeds]
    full = [encode_subgraph(sg) for sg in wholes]
    node_sets = [SubgraphNodes(sampler.sample_nodes(seed), induction, seed=seed) for seed in seeds]
    nodes = [encode_nodes(ns) for ns in node_sets]
    expander = SubgraphExpander(dataset)
    # Node-set entries (encode_nodes): decode_entry gives SubgraphNodes.
    equal = all(expander(cast(SubgraphNodes, decode_entry(b))).equals(sg) for b, sg in zip(nodes, wholes, strict=True))

    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})  # this thread only, as the plain loop; restored below
    decode_ms, expand_ms, encode_ms = [], [], []
    try:
        for round_ in range(rounds + 1):  # round 0: warm-up (compilation, page cache), discarded
            t0 = time.perf_counter()
            for data in full:
                decode_subgraph(data)
            t1 = time.perf_counter()
            for data in nodes:
                expander(cast(SubgraphNodes, decode_entry(data)))
            t2 = time.perf_counter()
            for ns in node_sets:
                encode_nodes(ns)
            t3 = time.perf_counter()
            if round_:
                decode_ms.append(1000 * (t1 - t0) / count)
                expand_ms.append(1000 * (t2 - t1) / count)
                encode_ms.append(1000 * (t3 - t2) / count)
    finally:
        os.sched_setaffinity(0, saved)
    return {
        "bytes_full": sum(map(len, full)) / count,
        "bytes_nodes": sum(map(len, nodes)) / count,
        "decode_full_ms": statistics.median(decode_ms),
        "decode_full_ms_range": [min(decode_ms), max(decode_ms)],
        "expand_nodes_ms": statistics.median(expand_ms),
        "expand_nodes_ms_range": [min(expand_ms), max(expand_ms)],
        "nodes_encode_ms": statistics.median(encode_ms),
        "expanded_equal": equal,
    }
