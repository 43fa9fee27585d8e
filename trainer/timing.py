"""Where the time of a training run went: one breakdown for a trainer's loop and for ``saintpipe run``'s summary.

It lives in the trainer because the trainer measures most of it and may not import the pipeline, while the
pipeline (which adds the sampler workers' and its own figures) may import the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar


@dataclass
class TimeBreakdown:
    """Seconds spent, summed over the trainers (over the sampler workers for the two sampler fields).

    A trainer's loop fills the fields of :attr:`TRAINER_FIELDS` for itself, and
    :meth:`merged` combines data-parallel trainers; ``saintpipe run`` takes
    those and adds ``sampling``, ``sampler_pool_wait`` and ``startup``, and
    its own ``wall``. A field nobody measured stays 0.

    Attributes:
        sampling: sampler workers drawing and inducing subgraphs (runs beside training, on its own cores).
        sampler_pool_wait: sampler workers blocked on a full pool (they were ahead of the trainers).
        sampling_wait: trainers waiting for subgraphs to arrive (an empty pool, or sampling in-process).
        feature_fetch: trainers fetching feature rows (overlapped with compute when prefetching).
        compute: trainers' forward, backward, gradient all-reduce and optimizer steps.
        data_wait: trainers blocked waiting for their next subgraph and its features.
        evaluation: validation and test scoring.
        startup: ``saintpipe run`` from the command's start to the first training step's data being requested.
        wall: wall clock: of a trainer's run (a group's: its longest), or of the whole ``saintpipe run``
            command, start-up and teardown included.
    """

    sampling: float = 0.0
    sampler_pool_wait: float = 0.0
    sampling_wait: float = 0.0
    feature_fetch: float = 0.0
    compute: float = 0.0
    data_wait: float = 0.0
    evaluation: float = 0.0
    startup: float = 0.0
    wall: float = 0.0

    # What a trainer measures, in the order of its flat summary (TrainResult.summary()).
    TRAINER_FIELDS: ClassVar[tuple[str, ...]] = (
        "sampling_wait", "feature_fetch", "data_wait", "compute", "evaluation", "wall",
    )

    @classmethod
    def merged(cls, parts: list[TimeBreakdown]) -> TimeBreakdown:
        """The breakdown of a group that ran side by side: every field summed, the wall clock the longest."""
        out = cls(**{f.name: sum(getattr(p, f.name) for p in parts) for f in fields(cls)})
        out.wall = max((p.wall for p in parts), default=0.0)
        return out
