"""Helpers of the feature-service integration tests (a uniquely named module, imported by the tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.feature_shard.server import create_server

NUM_NODES = 3001
NUM_SHARDS = 3
FEATURE_DIM = 24


def start_shards(dataset: Path, **kwargs) -> tuple[list, list[list[str]]]:
    servers = [create_server(dataset, k, **kwargs) for k in range(open_dataset(dataset).manifest.num_shards)]
    return [s for s, _ in servers], [[f"127.0.0.1:{port}"] for _, port in servers]


def freeze(process: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGSTOP ``process`` and wait until every one of its threads is stopped.

    kill() only marks the stop pending: until the kernel has parked each thread,
    a handler thread that wakes for an incoming call can still answer it (seen
    on a loaded 2-core CI machine). /proc shows state T once a thread is parked.
    """
    process.send_signal(signal.SIGSTOP)
    tasks = f"/proc/{process.pid}/task"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(tasks):
            with open(f"{tasks}/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(state in ("T", "t") for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {process.pid} did not stop within {timeout:g} s: thread states {states}")
