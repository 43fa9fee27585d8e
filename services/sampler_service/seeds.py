"""Random streams of the sampler workers, derived so that any subgraph can be drawn again.

Every subgraph's seed is a pure function of (job seed, worker index, sequence
number). A worker therefore needs no state to continue its stream after a
restart beyond its next sequence number, and anyone holding a subgraph's
``(worker, sequence)`` can re-draw it bit for bit. ``numpy.random.SeedSequence``
mixes the three integers so neighbouring workers and sequences get unrelated
streams (plain ``seed + worker`` would make worker 1's stream worker 0's
stream shifted by one).
"""

from __future__ import annotations

import numpy as np

# Tags that keep the training stream and the normalization pre-sampling stream apart.
TRAINING_STREAM = 0
NORMALIZATION_STREAM = 1

# Numba's np.random.seed takes a uint32; keep every seed in that range.
SEED_BITS = 32


def subgraph_seed(job_seed: int, worker: int, sequence: int, stream: int = TRAINING_STREAM) -> int:
    """The seed of subgraph ``sequence`` of ``worker`` in a job seeded with ``job_seed``.

    Args:
        job_seed: the job's seed (>= 0).
        worker: the worker index (>= 0).
        sequence: the subgraph's sequence number within the worker (>= 0).
        stream: which stream (training or normalization pre-sampling).

    Returns:
        An int in [0, 2**32).

    Example:
        >>> subgraph_seed(7, 0, 0) == subgraph_seed(7, 0, 0) != subgraph_seed(7, 1, 0)
        True
    """
    if min(job_seed, worker, sequence, stream) < 0:
        raise ValueError(f"seed parts must be >= 0, got {(job_seed, worker, sequence, stream)}")
    state = np.random.SeedSequence([job_seed, stream, worker, sequence]).generate_state(1, np.uint32)
    return int(state[0])


def presample_seed(norm_seed: int, index: int) -> int:
    """The seed of pre-sampled subgraph ``index`` for the normalization estimate.

    It depends only on ``index`` (not on which worker draws it), so the summed
    counts are the same whatever the number of workers.
    """
    return subgraph_seed(norm_seed, 0, index, stream=NORMALIZATION_STREAM)


def split_range(total: int, parts: int) -> list[tuple[int, int]]:
    """Split [0, total) into ``parts`` contiguous [start, stop) ranges of near-equal size."""
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    bounds = [total * k // parts for k in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))
