"""The Numba kernels compiled once, before the first run needs them.

Numba compiles a kernel on its first call and keeps the machine code in its cache (``__pycache__`` beside the
sources, or ``$NUMBA_CACHE_DIR``); later processes load it in milliseconds. On a fresh install every kernel a
run uses compiles during that first run, inside the sampler workers and the trainer, while the trainer waits
for data (tens of seconds on 2 cores). :func:`warm_up` pays that once, at set-up (``./scripts/run.sh`` calls
``saintpipe warmup --if-cold``): a one-epoch run of the whole pipeline on a small demo graph, so every kernel
is compiled through the very code paths, array types and read-only memory maps of a real run.
:func:`~saintpipe.pipeline.kernel_cache.kernels_cached` tells a run whether it must still compile, which it
then says once.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import time
from pathlib import Path

def warm_up(nodes: int = 6000) -> float:
    """Compile every kernel the default run uses, by a one-epoch run on a demo graph of ``nodes`` nodes (in a
    temporary directory, removed after); returns the seconds it took.

    Raises:
        RunFailed: the small run failed (what a real run would then hit too).
    """
    from saintpipe.pipeline.config import load_pipeline_config
    from saintpipe.pipeline.runner import LocalPipeline
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import write_dataset

    start = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="saintpipe-warmup-"))
    try:
        data = scratch / "demo"
        write_dataset(data, num_shards=2, **generate_demo(num_nodes=nodes))  # the demo's layout and dtypes
        config = load_pipeline_config(None, data=data, run_dir=scratch / "run")
        config.trainer.epochs = 1
        config.run.progress = False
        config.run.metrics = False
        # Compiling is what the warm-up is for: `saintpipe warmup` says so itself.
        LocalPipeline(config, out=io.StringIO(), announce_compiling=False).run()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.monotonic() - start
