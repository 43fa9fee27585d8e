"""``saintpipe bench loader --data DIR``: what the loader costs, on an embedded pipeline.

Prints the embedded pipeline's start-up and stop times, and the rate at which a loop that does nothing with
its minibatches gets them, through ``DataLoader(batch_size=None)`` with ``num_workers`` 0 and then each value
of ``--workers`` (spawned workers; their start-up is measured apart, with the first minibatch). The rate is
the pipeline's delivery rate seen by one consumer: sampling, the pool, the feature gathers and building the
tensors.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from saintpipe.loader.stream import SubgraphLoader


def _rate(loader: SubgraphLoader, workers: int) -> tuple[float, float, int]:
    """(seconds to the first minibatch, minibatches/s after it, minibatches) of one iteration."""
    from torch.utils.data import DataLoader

    extra: dict[str, Any] = {"num_workers": workers, "multiprocessing_context": "spawn"} if workers else {}
    start = time.perf_counter()
    first = None
    count = 0
    for _ in DataLoader(loader, batch_size=None, **extra):
        count += 1
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    if first is None:  # no minibatch came (what `None - start` raised before)
        raise TypeError("the loader yielded no minibatch")
    return first - start, (count - 1) / max(end - first, 1e-9), count


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer

    parser = sub.add_parser("loader",
                            help="the loader's minibatch rate, with and without DataLoader workers, and its start-up",
                            description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--data", type=Path, required=True, help="dataset directory")
    parser.add_argument("--steps", type=integer(1, 2**31 - 1), default=200,
                        help="minibatches per measurement (default 200)")
    parser.add_argument("--roots", type=integer(1, 2**31 - 1), default=150,
                        help="random-walk roots per subgraph (default 150)")
    parser.add_argument("--workers", type=integer(0, 4096), nargs="*", default=[2],
                        help="DataLoader worker counts (default 2)")
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    from saintpipe.loader import SubgraphLoader

    overrides = {"samplers": {"sampler": {"roots": args.roots}}, "run": {"metrics": False},
                 "pool": {"job_id": "loader-bench"}}
    start = time.perf_counter()
    loader = SubgraphLoader.embedded(args.data, steps=args.steps, overrides=overrides)
    print(f"embedded pipeline start-up   {time.perf_counter() - start:7.2f} s")
    try:
        for workers in [0, *args.workers]:
            first, rate, count = _rate(loader, workers)
            print(f"num_workers={workers:<2} first minibatch {first:6.2f} s, then {rate:7.1f} minibatches/s "
                  f"({count} minibatches)")
    finally:
        start = time.perf_counter()
        loader.close()
        print(f"close (everything stopped)   {time.perf_counter() - start:7.2f} s")
    return 0
