"""Start feature-shard servers as local subprocesses (the laptop default; the benchmark uses it too).

Each shard runs ``python -m saintpipe serve feature-shard --data DIR --shard k --port 0``
on loopback; the address is read from its "listening on HOST:PORT" line.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

from saintpipe.core.errors import ServiceUnavailable
from saintpipe.core import procutil

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]


class ShardProcess:
    """One ``saintpipe serve feature-shard`` subprocess.

    With ``wait=False`` the constructor returns at once; call :meth:`wait_ready`
    (several servers then start in parallel).
    """

    def __init__(
        self,
        dataset_dir: Path | str,
        shard: int,
        *,
        host: str = "127.0.0.1",
        extra_args: Sequence[str] = (),
        start_timeout: float = 60.0,
        own_process_group: bool = False,
        wait: bool = True,
    ) -> None:
        self.shard = shard
        self._log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [
            sys.executable,
            "-m",
            "saintpipe",
            "serve",
            "feature-shard",
            "--data",
            str(dataset_dir),
            "--shard",
            str(shard),
            "--host",
            host,
            "--port",
            "0",
            *extra_args,
        ]
        # Dies with its parent (PR_SET_PDEATHSIG): a crashed or killed parent leaves no shard behind. In its own
        # process group, a Ctrl-C at the terminal reaches only a supervisor that stops it in order.
        self.process = procutil.spawn(cmd, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
                                      own_process_group=own_process_group)
        self.output: list[str] = []  # every stdout line, as it arrives
        self.metrics_url: str | None = None  # when started with --metrics-port
        self.address: str | None = None  # "host:port" once ready
        self._host, self._start_timeout = host, start_timeout
        # A thread reads stdout, so a wedged server cannot block us past the
        # timeout and later output never fills the pipe.
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._pump = threading.Thread(target=self._read_stdout, name=f"shard{shard}-stdout", daemon=True)
        self._pump.start()
        if wait:
            self.wait_ready()

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            self.output.append(line.rstrip("\n"))
            self._lines.put(line)
        self._lines.put(None)

    def wait_ready(self) -> str:
        """Wait for the "listening on" line; returns the address.

        Raises:
            ServiceUnavailable: the server exited or stayed silent past the start timeout (with its stderr).
        """
        if self.address is not None:
            return self.address
        deadline = time.monotonic() + self._start_timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                break
            if line.startswith("metrics on "):
                self.metrics_url = line.split(" ", 2)[2].strip()
            if line.startswith("listening on "):
                self.address = f"{self._host}:{line.strip().rsplit(':', 1)[1]}"
                return self.address
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._log.seek(0)
        output = self._log.read()[-2000:].strip()
        self.stop()
        raise ServiceUnavailable(
            f"feature shard {self.shard} did not start (exit code {self.process.returncode}): {output}"
        )

    def stop(self, kill: bool = False, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful) or SIGKILL the server and wait for it; returns its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._pump.join(5.0)  # the last lines ("stopped") are in self.output once it returns
        if not self._log.closed:
            self._log.close()
        return self.process.returncode


class LocalShards:
    """All shards of a dataset as local subprocesses (optionally several replicas each).

    Example::

        with LocalShards("data/demo", num_shards=2) as shards:
            client = FeatureClient(shards.addresses)
    """

    def __init__(
        self,
        dataset_dir: Path | str,
        num_shards: int,
        *,
        replicas: int = 1,
        extra_args: Sequence[str] = (),
        own_process_group: bool = False,
    ) -> None:
        self.processes: list[list[ShardProcess]] = []
        try:
            for k in range(num_shards):  # all start at once, then we wait for each
                self.processes.append(
                    [
                        ShardProcess(
                            dataset_dir, k, extra_args=extra_args, own_process_group=own_process_group, wait=False
                        )
                        for _ in range(replicas)
                    ]
                )
            for replicas_of_shard in self.processes:
                for process in replicas_of_shard:
                    process.wait_ready()
        except BaseException:
            self.stop()
            raise

    @property
    def addresses(self) -> list[list[str]]:
        return [[p.address for p in replicas] for replicas in self.processes]

    def stop(self) -> None:
        """SIGTERM every shard at once (they drain in parallel), then wait for each."""
        for replicas in self.processes:
            for p in replicas:
                if p.process.poll() is None:
                    p.process.send_signal(signal.SIGTERM)
        for replicas in self.processes:
            for p in replicas:
                p.stop()

    def __enter__(self) -> "LocalShards":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
