"""Fixtures of the loader's integration tests: a small demo dataset and what the embedded pipeline leaves behind."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import psutil
import pytest

from tests.support.pipeline import small_dataset

# Small subgraphs of the 3,000-node demo (about 400 nodes): several per epoch, fast steps.
SMALL_SUBGRAPHS = {"samplers": {"sampler": {"roots": 150}}, "run": {"metrics": False}}


@pytest.fixture(scope="session")
def loader_data(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("loader") / "small")


def unique_job(tag: str) -> str:
    """A job id no other test run on this machine uses (its shared-memory slots carry it)."""
    return f"loader-{tag}-{os.getpid()}-{time.monotonic_ns() % 10**9}"


def overrides(job: str) -> dict:
    return {**SMALL_SUBGRAPHS, "pool": {"job_id": job}}


class Leftovers:
    """What an embedded pipeline started, observed while it runs, and what of it is still there afterwards."""

    def __init__(self) -> None:
        self.before = {p.pid for p in psutil.Process().children(recursive=True)}
        self.seen: dict[int, psutil.Process] = {}
        self.ports: set[int] = set()

    def observe(self, pipeline) -> None:
        for child in psutil.Process().children(recursive=True):
            if child.pid not in self.before and not _interpreter_helper(child):
                self.seen.setdefault(child.pid, child)
        endpoints = pipeline.endpoints
        self.ports.add(int(endpoints.redis.rsplit(":", 1)[1].split("/")[0]))
        self.ports.update(int(a.rsplit(":", 1)[1]) for replicas in endpoints.shards for a in replicas)

    def alive(self, wait_s: float = 15.0) -> list[str]:
        deadline = time.monotonic() + wait_s
        while True:
            left = []
            for pid, proc in self.seen.items():
                try:
                    if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                        left.append(f"{pid} {' '.join(proc.cmdline())[:100]}")
                except (psutil.NoSuchProcess, psutil.ZombieProcess):
                    continue
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)

    def listening(self) -> list[int]:
        still = []
        for port in sorted(self.ports):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.5)
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    still.append(port)
        return still


def _interpreter_helper(proc: psutil.Process) -> bool:
    """Python's multiprocessing resource tracker: one per interpreter, started by the first shared-memory
    region (the feature client's), holding nothing once they are unlinked, exiting with this process."""
    try:
        return "multiprocessing.resource_tracker" in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def shm_files(job: str) -> list[str]:
    """/dev/shm files of ``job``'s pool slots and of this process's feature-client regions."""
    from saintpipe.services.feature_shard import shm
    from saintpipe.services.pool import shared_memory

    slots = [p.name for p in shared_memory.SHM_DIR.glob(f"{shared_memory.PREFIX}*-{job}+*")]
    regions = [p.name for p in shm.SHM_DIR.glob(f"{shm.region_prefix()}*")]
    return sorted(slots + regions)
