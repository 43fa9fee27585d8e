"""How the pre-sampling for the normalization is shared among the workers.

Seeds themselves come from the sampler package (``saintpipe.services.sampler.parallel``:
``subgraph_seed(job_seed, worker, sequence)`` for training subgraphs and
``stream_seed(seed, PRESAMPLE_STREAM, i)`` for pre-sampled ones), so the
service and the sampler's own tools draw the same subgraphs.
"""

from __future__ import annotations


def split_range(total: int, parts: int) -> list[tuple[int, int]]:
    """Split [0, total) into ``parts`` contiguous [start, stop) ranges of near-equal size."""
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    bounds = [total * k // parts for k in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))
