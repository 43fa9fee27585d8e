"""A sampler worker's per-subgraph scratch stays in the heap (tune_malloc), instead of being faulted in anew.

The service's worker actor samples in a thread of a process that has freed
nothing large before it (the oriented lists come mapped from Ray's object
store), which is where glibc's moving thresholds left every subgraph's few MB
of kernel scratch to fresh mmaps: 508 page faults per subgraph and a third of
the worker's time at Kronecker scale 18. Each case runs in a fresh
interpreter, as a worker does, on lists memory-mapped from files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from saintpipe.services.dataset.kronecker import generate_kronecker
from saintpipe.services.sampler.kernels.oriented import orient_graph

WORKER = textwrap.dedent("""
    import json, resource, sys, threading
    import numpy as np
    from saintpipe.core.malloc import tune_malloc
    from saintpipe.services.sampler.config import RandomWalkConfig
    from saintpipe.services.sampler.kernels.oriented import Orientation
    from saintpipe.services.sampler.sampler import make_sampler

    folder, tuned = sys.argv[1], sys.argv[2] == "tuned"
    if tuned:
        assert tune_malloc()
    load = lambda name: np.load(f"{folder}/{name}.npy", mmap_mode="r")
    orientation = Orientation(*(load(f"o{i}") for i in range(4)))
    out = {}

    def run():
        sampler = make_sampler(RandomWalkConfig(roots=3000, walk_length=2), load("indptr"), load("indices"),
                               orientation=orientation)
        sampler.sample(0)  # compiled code and the lists' pages
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for seed in range(1, 101):
            sampler.sample(seed)
        out["faults"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 100

    thread = threading.Thread(target=run)  # the actor samples in a thread too
    thread.start()
    thread.join()
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kron15")
    graph = generate_kronecker(15, 16, seed=0, feature_dim=1)
    np.save(folder / "indptr.npy", graph["indptr"])
    np.save(folder / "indices.npy", graph["indices"])
    for i, array in enumerate(orient_graph(graph["indptr"], graph["indices"])):
        np.save(folder / f"o{i}.npy", array)
    return folder


def _faults_per_subgraph(folder, mode: str) -> float:
    proc = subprocess.run([sys.executable, "-c", WORKER, str(folder), mode], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["faults"]


def test_tuned_worker_reuses_its_scratch(graph_files):
    tuned = _faults_per_subgraph(graph_files, "tuned")
    untuned = _faults_per_subgraph(graph_files, "default")
    # Untuned, each subgraph maps its scratch anew (hundreds of 4 KiB pages); tuned, nearly nothing.
    assert tuned < 5, tuned
    assert untuned > 10 * max(tuned, 1.0), (untuned, tuned)
