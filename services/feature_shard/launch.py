"""Start feature-shard servers as local subprocesses (the laptop default; the benchmark uses it too).

Each shard runs ``python -m saintpipe serve feature-shard --data DIR --shard k --port 0``
on loopback; the address is read from its "listening on HOST:PORT" line.
:meth:`LocalShards.restart` starts a replica again on the port it had, so its
clients (which retry UNAVAILABLE, see :mod:`saintpipe.services.feature_shard.replicas`)
carry on without being told anything.

:class:`LocalShards` guards its shards with a fresh random token (on by
default): the servers get it through their environment (never argv, which any
user of the host can read in ``ps``), its clients from a file only this user
can read (:attr:`LocalShards.token_file`, :meth:`LocalShards.client_security`),
deleted when the shards stop.
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from typing import IO, cast

from saintpipe.core.errors import ServiceUnavailable
from saintpipe.core import procutil
from saintpipe.services.feature_shard.security import TOKEN_ENV, ClientSecurity

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]


class ShardProcess:
    """One ``saintpipe serve feature-shard`` subprocess.

    With ``wait=False`` the constructor returns at once; call :meth:`wait_ready`
    (several servers then start in parallel). ``token``: the token the server
    requires, passed in its environment (:data:`TOKEN_ENV`); None: none, even
    if this process's environment has one.
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
        port: int = 0,
        token: str | None = None,
        command_prefix: Sequence[str] = (),
    ) -> None:
        self.shard = shard
        self._log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env.pop(TOKEN_ENV, None)
        if token is not None:
            env[TOKEN_ENV] = token
        cmd = [
            *command_prefix,  # e.g. `ip netns exec NS` (saintpipe.core.netns): a server on another network host
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
            str(port),
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
        for line in cast(IO[str], self.process.stdout):  # started with stdout=PIPE: not None
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
        output = self.stderr(2000).strip()
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
        self._stderr_tail = self.stderr()
        if not self._log.closed:
            self._log.close()
        return self.process.returncode

    @property
    def port(self) -> int | None:
        return None if self.address is None else int(self.address.rsplit(":", 1)[1])

    def stderr(self, limit: int = 1 << 20) -> str:
        """The last ``limit`` bytes the server wrote to stderr (its log), also after :meth:`stop`."""
        if self._log.closed:
            return getattr(self, "_stderr_tail", "")[-limit:]
        # pread: the server shares this file's offset (its stderr is a copy of the descriptor), so seeking
        # here would make it overwrite its own log.
        fd = self._log.fileno()
        size = os.fstat(fd).st_size
        return os.pread(fd, min(size, limit), max(0, size - limit)).decode("utf-8", errors="replace")


_LAUNCHER: tuple[int, futures.ThreadPoolExecutor] | None = None  # (pid that made it, executor)
_LAUNCHER_LOCK = threading.Lock()


def _launcher() -> futures.ThreadPoolExecutor:
    """The one thread, alive as long as this process, that spawns every LocalShards server.

    A shard asks for SIGTERM when the *thread* that started it ends (PR_SET_PDEATHSIG
    follows the parent thread, see :mod:`saintpipe.core.procutil`): spawned from a
    short-lived thread (a supervisor's restart callback, say), it would be killed as
    soon as that thread returns.
    """
    global _LAUNCHER
    with _LAUNCHER_LOCK:
        if _LAUNCHER is None or _LAUNCHER[0] != os.getpid():  # a forked child has the object, not the thread
            _LAUNCHER = (os.getpid(), futures.ThreadPoolExecutor(1, thread_name_prefix="shard-launcher"))
        return _LAUNCHER[1]


class LocalShards:
    """All shards of a dataset as local subprocesses (optionally several replicas each).

    ``token=True`` (the default): the shards require a fresh random token,
    which :meth:`client_security` (and :attr:`token_file`) hand to clients.

    Example::

        with LocalShards("data/demo", num_shards=2) as shards:
            client = FeatureClient(shards.addresses, security=shards.client_security())
    """

    def __init__(
        self,
        dataset_dir: Path | str,
        num_shards: int,
        *,
        replicas: int = 1,
        extra_args: Sequence[str] = (),
        own_process_group: bool = False,
        token: bool = True,
        host: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
    ) -> None:
        self.processes: list[list[ShardProcess]] = []
        self._host, self._prefix = host, tuple(command_prefix)
        self._dataset_dir, self._extra_args, self._own_group = dataset_dir, extra_args, own_process_group
        self._token: str | None = None
        self._secrets_dir: str | None = None
        self.token_file: Path | None = None  # holds the token (mode 0600, in a 0700 directory) while they run
        if token:
            self._token = secrets.token_urlsafe(32)
            self._secrets_dir = tempfile.mkdtemp(prefix="saintpipe-shards-")  # mode 0700
            self.token_file = Path(self._secrets_dir) / "feature-token"
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self._token + "\n")
        try:
            for k in range(num_shards):  # all start at once, then we wait for each
                self.processes.append([self._spawn(k) for _ in range(replicas)])
            for replicas_of_shard in self.processes:
                for process in replicas_of_shard:
                    process.wait_ready()
        except BaseException:
            self.stop()
            raise

    @property
    def addresses(self) -> list[list[str]]:
        # Every process is ready here (start() waited for each): its address is known.
        return [[cast(str, p.address) for p in replicas] for replicas in self.processes]

    def client_security(self) -> ClientSecurity:
        """What a FeatureClient needs to be let in (the token file; nothing without a token)."""
        return ClientSecurity(token_file=self.token_file)

    def restart(self, shard: int, replica: int = 0, *, bind_timeout: float = 10.0) -> ShardProcess:
        """Start replica ``replica`` of shard ``shard`` again, on the same port, with the same data and flags.

        The old process is stopped first if it still runs (SIGTERM, graceful). Its
        clients keep their address and retry meanwhile. If the port cannot be
        bound at once (still held for a moment), binding is retried for up to
        ``bind_timeout`` seconds. Safe to call from any thread.

        Returns:
            The new process, ready; it replaces the old one in :attr:`processes`.

        Raises:
            ServiceUnavailable: the new server did not start (its stderr in the message).
        """
        old = self.processes[shard][replica]
        port = old.port
        old.stop()
        give_up = time.monotonic() + bind_timeout
        while True:
            new = self._spawn(shard, port or 0)
            try:
                new.wait_ready()
                break
            except ServiceUnavailable as exc:
                if "cannot listen" not in str(exc) or time.monotonic() > give_up:
                    raise
                log.info("feature shard %d: port %s not free yet; trying again", shard, port)
                time.sleep(0.2)
        self.processes[shard][replica] = new
        log.info("feature shard %d replica %d restarted at %s (pid %d)", shard, replica, new.address,
                 new.process.pid)
        return new

    def _spawn(self, shard: int, port: int = 0) -> ShardProcess:
        """Start a server of ``shard`` (not waiting for it) from the launcher thread."""
        return _launcher().submit(
            ShardProcess, self._dataset_dir, shard, extra_args=self._extra_args,
            own_process_group=self._own_group, wait=False, port=port, token=self._token, host=self._host,
            command_prefix=self._prefix,
        ).result()

    def stop(self) -> None:
        """SIGTERM every shard at once (they drain in parallel), then wait for each."""
        everyone = [p for replicas in self.processes for p in replicas]
        for p in everyone:
            if p.process.poll() is None:
                p.process.send_signal(signal.SIGTERM)
        for p in everyone:
            p.stop()
        if self._secrets_dir is not None:
            shutil.rmtree(self._secrets_dir, ignore_errors=True)

    def __enter__(self) -> "LocalShards":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
