"""Whether a run must still compile its kernels: Numba's cache, where the environment puts it."""

from __future__ import annotations

import subprocess
import sys

from saintpipe.pipeline.kernel_cache import kernels_cached


def test_an_empty_cache_directory_means_the_kernels_must_be_compiled(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert not kernels_cached()
    # Numba keeps a module's cache under a folder named for the source's directory.
    index = tmp_path / "kernels_0123abcd" / "induce.complete_subgraph-292.py311.nbi"
    index.parent.mkdir()
    index.write_bytes(b"")
    assert kernels_cached()


def test_another_kernel_s_index_is_not_taken_for_the_samplers(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    (tmp_path / "induce.induce_node_set-400.py311.nbi").write_bytes(b"")
    assert not kernels_cached()


def test_warmup_if_cold_does_nothing_when_the_kernels_are_cached(tmp_path):
    index = tmp_path / "k" / "induce.complete_subgraph-1.py311.nbi"
    index.parent.mkdir()
    index.write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "saintpipe", "warmup", "--if-cold"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "NUMBA_CACHE_DIR": str(tmp_path)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_the_timeline_counts_from_the_wrapper_s_moment_when_it_gives_one(monkeypatch):
    import time

    from saintpipe.pipeline.timeline import STARTED_AT_ENV, Timeline, process_started_at

    monkeypatch.delenv(STARTED_AT_ENV, raising=False)
    assert process_started_at() <= time.time()
    monkeypatch.setenv(STARTED_AT_ENV, "1000.5")
    timeline = Timeline()
    assert timeline.origin == 1000.5
    assert timeline.mark("ray", at=1003.0) == 2.5
    assert timeline.mark("ray", at=1009.0) == 2.5  # the first moment of a part stands
