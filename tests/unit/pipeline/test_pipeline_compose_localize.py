"""The compose-as-local-processes mapping: no container hostname, port or path survives, no port is shared."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.support.compose import read_env_file
from tests.support.compose_processes import LocalCompose, _seconds

ROOT = Path(__file__).resolve().parents[3]
SERVICES = ["redis", "prepare-data", "feature-shard-0", "feature-shard-1", "ray-head", "samplers", "trainer",
            "prometheus"]


@pytest.fixture
def compose(tmp_path):
    c = LocalCompose(ROOT / "docker-compose.yml", read_env_file(ROOT / ".env.example"), tmp_path, SERVICES)
    yield c
    shutil.rmtree(c.tmp_root, ignore_errors=True)


def everything(compose: LocalCompose, name: str) -> str:
    env = compose.environment(name)
    spec_env = compose.services[name].spec.get("environment") or {}
    return " ".join([*compose.argv(name), *compose.healthcheck(name), *(env[k] for k in spec_env)])


@pytest.mark.parametrize("name", SERVICES)
def test_no_container_hostname_or_path_is_left(compose, name):
    text = everything(compose, name)
    hosts = "|".join(re.escape(s) for s in SERVICES)
    assert not re.search(rf"(?<![\w.-])({hosts}):\d+", text), text
    assert "0.0.0.0" not in text, text
    assert not re.search(r"(?:^|[ =])(/data|/etc/prometheus)\b", text), text  # container paths


def test_each_service_listens_on_its_own_free_ports(compose):
    ports = [p for svc in compose.services.values() for p in svc.ports.values()]
    assert len(ports) == len(set(ports))
    assert set(compose.services["feature-shard-0"].ports) == {50051, 9100}  # the same inside both containers
    assert compose.services["feature-shard-0"].ports != compose.services["feature-shard-1"].ports
    assert set(compose.services["redis"].ports) == {6379} and set(compose.services["ray-head"].ports) == {6379}


def test_references_point_at_the_right_service(compose):
    shard1 = compose.services["feature-shard-1"].ports[50051]
    redis, ray_head = compose.services["redis"].ports[6379], compose.services["ray-head"].ports[6379]
    trainer = compose.argv("trainer")
    assert f"127.0.0.1:{shard1}" in trainer[trainer.index("--features") + 1]
    assert f"@127.0.0.1:{redis}/0" in trainer[trainer.index("--redis-url") + 1]
    assert f"--address=127.0.0.1:{ray_head}" in " ".join(compose.argv("samplers"))
    assert f"--port={ray_head}" in compose.argv("ray-head")


def test_the_bind_mounted_prometheus_config_is_localized(compose):
    argv = compose.argv("prometheus")
    config = Path(next(a for a in argv if a.startswith("--config.file=")).split("=", 1)[1])
    text = config.read_text()
    assert f"127.0.0.1:{compose.services['trainer'].ports[9102]}" in text
    assert "feature-shard-0:" not in text


def test_compose_durations():
    assert (_seconds("10s"), _seconds("1m30s"), _seconds("500ms"), _seconds(3)) == (10.0, 90.0, 0.5, 3.0)
