"""The precompile process a run with a cold kernel cache starts beside itself (saintpipe.pipeline.precompile):
it fills Numba's cache with the normalization prior's and the codec's kernels, with the array types the run's
own calls have, so that the sampler service, the sampler worker and the trainer load them instead of compiling
them on the first subgraph's path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.pipeline import small_dataset


def _compiled(cache: Path, kernel: str) -> list[Path]:
    """The machine-code files of ``kernel`` (``module.function``) in the cache: one per specialization."""
    return sorted(cache.rglob(f"{kernel}-*.nbc"))


def test_a_cold_cache_gets_the_prior_s_and_the_codec_s_kernels_with_the_types_the_run_uses(tmp_path):
    data = small_dataset(tmp_path / "demo", nodes=800)
    cache = tmp_path / "numba"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    sampler = {"kind": "random_walk", "roots": 50, "walk_length": 2}
    done = subprocess.run([sys.executable, "-m", "saintpipe.pipeline.precompile", "--data", str(data),
                           "--sampler", json.dumps(sampler), "--graph", "auto"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for kernel in ("inclusion.walk_visits", "inclusion._alpha_rows",  # the prior
                   "fused.layout_graph", "fused.fill", "validate.ids_ok",  # framing and sealing
                   "fused.check_message"):  # decoding
        assert _compiled(cache, kernel), f"{kernel} is not in the cache"

    # A consumer decoding what a producer encoded, in a fresh process: Numba finds the decoder's kernels for
    # its types in the cache (no new specialization written), and so does the service computing the prior.
    before = {k: _compiled(cache, k) for k in ("fused.check_message", "inclusion._alpha_rows")}
    code = ("import sys, numpy as np\n"
            "from saintpipe.core.subgraph import Subgraph\n"
            "from saintpipe.services.pool.codec import encode_subgraph\n"
            "from saintpipe.services.pool.codec.compact import decode_entry\n"
            "from saintpipe.services.dataset.store import open_dataset\n"
            "from saintpipe.services.sampler.config import parse_sampler_config\n"
            "from saintpipe.services.sampler.inclusion import inclusion_probabilities\n"
            "sg = Subgraph(node_ids=np.arange(3), indptr=np.array([0, 2, 3, 4]), indices=np.array([1, 2, 0, 0],"
            " dtype=np.int32), edge_weights=np.ones(4, np.float32), edge_weights_t=np.ones(4, np.float32),"
            " loss_weights=np.ones(3, np.float32), job_id='j')\n"
            "print(decode_entry(encode_subgraph(sg)).num_nodes)\n"
            "d = open_dataset(sys.argv[1])\n"
            f"inclusion_probabilities(parse_sampler_config({sampler!r}), d.indptr, d.indices)\n")
    done = subprocess.run([sys.executable, "-c", code, str(data)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3"]
    assert {k: _compiled(cache, k) for k in before} == before
