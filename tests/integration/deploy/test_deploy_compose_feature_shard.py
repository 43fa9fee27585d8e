"""The compose file's dataset and certificate steps and feature shards, run as local processes.

Each compose service's own command runs here as a process with the
environment the file gives it, with the container paths and ports mapped to a
temporary directory and free loopback ports: prepare-data writes the dataset,
certs the TLS material and token, both feature shards serve the dataset over
TLS with the token, the compose health check (the same argv) reports them
healthy, a client holding the CA and the token (the trainer's flags) gathers
rows, one without the token is refused, and the checks report the shards
unhealthy once they stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from tests.support.cli import free_port, saintpipe_command

from saintpipe.core.errors import ConfigError
from tests.support.compose import as_list, healthcheck_argv, load_compose, read_env_file, service_environment

ROOT = Path(__file__).resolve().parents[3]
ENV = read_env_file(ROOT / ".env.example")
COMPOSE = load_compose(ROOT / "docker-compose.yml", ENV)


def localize(argv: list[str], data_dir: Path, ports: dict[str, str]) -> list[str]:
    """Container paths -> data_dir, container ports -> free loopback ports, all-interfaces binds -> loopback,
    `saintpipe` and `python` -> this environment's."""
    out = []
    for arg in argv:
        arg = arg.replace("/data", str(data_dir), 1) if arg.startswith("/data") else arg
        arg = arg.replace("/certs", str(data_dir / "certs"), 1) if arg.startswith("/certs") else arg
        arg = "127.0.0.1" if arg == "0.0.0.0" else arg
        for container_port, local_port in ports.items():
            arg = arg.replace(f":{container_port}", f":{local_port}")
        out.append(ports.get(arg, arg))
    if out and out[0] == "saintpipe":
        out = saintpipe_command() + out[1:]
    if out[:1] == ["python"]:
        out[0] = str(Path(saintpipe_command()[0]).parent / "python")
    return out


def process_env(service: dict) -> dict[str, str]:
    env = dict(os.environ)
    env.update(service_environment(service, ROOT, ENV))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def wait_healthy(argv: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, cwd=ROOT, check=False)
        if proc.returncode == 0 or time.monotonic() > deadline:
            return proc
        time.sleep(0.5)


@pytest.fixture
def prepared_data(tmp_path) -> Path:
    service = COMPOSE["services"]["prepare-data"]
    argv = as_list(service["command"])
    argv[argv.index("--nodes") + 1] = "3000"  # small: the wiring is under test, not the generator
    proc = subprocess.run(localize(argv, tmp_path, {}), env=process_env(service), capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "demo" / "manifest.json").is_file()
    service = COMPOSE["services"]["certs"]
    proc = subprocess.run(localize(as_list(service["command"]), tmp_path, {}), env=process_env(service),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in (tmp_path / "certs").iterdir()} >= {"ca.crt", "server.crt", "server.key", "token"}
    return tmp_path


def gather_as_the_trainer(data_dir: Path, addresses: list[list[str]], token: bool) -> None:
    """Rows from the shards with the trainer's TLS flags (its CA, its token file unless ``token`` is False)."""
    import numpy as np

    from saintpipe.services.feature_shard.client import FeatureClient
    from saintpipe.services.feature_shard.security import ClientSecurity

    trainer = as_list(COMPOSE["services"]["trainer"]["command"])
    flag = {trainer[i]: trainer[i + 1] for i in range(len(trainer) - 1) if trainer[i].startswith("--feature-")}
    local = dict(zip(flag, localize(list(flag.values()), data_dir, {})))
    security = ClientSecurity(tls_ca=local["--feature-tls-ca"],
                              token_file=local["--feature-token-file"] if token else None)
    with FeatureClient(addresses, security=security, shared_memory="off") as client:
        rows = client.gather(np.array([0, 2999, 1500]))
    assert rows.shape[0] == 3 and np.isfinite(rows).all()


def test_compose_feature_shards_serve_the_prepared_dataset_and_pass_their_health_checks(prepared_data):
    started = []
    try:
        for name in ("feature-shard-0", "feature-shard-1"):
            service = COMPOSE["services"][name]
            ports = {"50051": str(free_port()), "50052": str(free_port()), "9100": str(free_port())}
            argv = localize(as_list(service["command"]), prepared_data, ports)
            env = process_env(service)
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            started.append((name, proc, ports, env))
        for name, proc, ports, env in started:
            check = localize(healthcheck_argv(COMPOSE["services"][name]), prepared_data, ports)
            result = wait_healthy(check, env)
            assert result.returncode == 0, f"{name}: {result.stderr}\n{proc.stdout.read() if proc.poll() else ''}"
            assert "SERVING" in result.stdout
            with urllib.request.urlopen(f"http://127.0.0.1:{ports['9100']}/metrics", timeout=5) as reply:
                assert b"saintpipe_feature_requests_total" in reply.read()
        addresses = [[f"localhost:{ports['50051']}"] for _, _, ports, _ in started]
        gather_as_the_trainer(prepared_data, addresses, token=True)
        with pytest.raises(ConfigError, match="requires a token"):
            gather_as_the_trainer(prepared_data, addresses, token=False)
        for name, proc, ports, env in started:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, name
            check = localize(healthcheck_argv(COMPOSE["services"][name]), prepared_data, ports)
            assert subprocess.run(check, env=env, capture_output=True, timeout=30, cwd=ROOT, check=False).returncode == 1
    finally:
        for _, proc, _, _ in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
