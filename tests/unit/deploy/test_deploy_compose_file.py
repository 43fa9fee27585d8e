"""docker-compose.yml: valid against the Compose Specification, wired consistently.

There is no Docker engine here, so the file is checked the way Compose reads
it: interpolated with the committed .env.example, validated against the
Compose Specification's JSON schema (vendored: tests/data/README.md), then its
start order, health checks, volumes and ports cross-checked.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import jsonschema
import pytest

from tests.support.compose import (
    InterpolationError,
    as_list,
    healthcheck_argv,
    load_compose,
    load_raw,
    read_env_file,
    service_environment,
)

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
GPU_OVERRIDE = ROOT / "deploy" / "compose.gpu.yml"
ENV_EXAMPLE = ROOT / ".env.example"
SCHEMA = ROOT / "tests" / "data" / "compose-spec.json"
SCHEMA_SHA256 = "344712b36ae1900fa40cb484f45469e5ea8b2e4f49690d8c03776eb63fa6a1b1"

SAINTPIPE_SERVICES = {"prepare-data", "feature-shard-0", "feature-shard-1", "ray-head", "samplers", "trainer"}
ALL_SERVICES = SAINTPIPE_SERVICES | {"redis", "prometheus", "grafana"}


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return read_env_file(ENV_EXAMPLE)


@pytest.fixture(scope="module")
def compose(env) -> dict:
    return load_compose(COMPOSE, env)


@pytest.fixture(scope="module")
def validator():
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256, (
        "tests/data/compose-spec.json changed: update its provenance note in tests/data/README.md and the pin here")
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(doc)]


def test_compose_file_validates_against_the_compose_specification(validator, compose):
    assert _errors(validator, load_raw(COMPOSE)) == []
    assert _errors(validator, compose) == []
    assert _errors(validator, load_raw(GPU_OVERRIDE)) == []


def test_schema_rejects_what_compose_would_reject(validator, compose):
    # The check has teeth: a misspelt key and an unknown depends_on condition fail.
    broken = json.loads(json.dumps(compose))
    broken["services"]["trainer"]["healthchek"] = broken["services"]["trainer"].pop("healthcheck")
    assert any("healthchek" in e for e in _errors(validator, broken))
    broken = json.loads(json.dumps(compose))
    broken["services"]["trainer"]["depends_on"]["redis"]["condition"] = "service_ready"
    assert _errors(validator, broken)


def test_every_service_of_the_pipeline_is_there(compose):
    assert set(compose["services"]) == ALL_SERVICES


def test_secrets_come_from_the_env_file_and_are_required(env):
    raw = COMPOSE.read_text()
    for name in ("REDIS_PASSWORD", "RAY_AUTH_TOKEN", "GRAFANA_ADMIN_PASSWORD"):
        assert f"${{{name}:?" in raw, f"{name} must be required (${{{name}:?...}}), never defaulted"
        assert env[name].startswith("change-me"), f".env.example must hold a placeholder for {name}"
        without = {k: v for k, v in env.items() if k != name}
        with pytest.raises(InterpolationError, match=name):
            load_compose(COMPOSE, without)
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "/.env" in ignored or ".env" in ignored


def test_every_variable_the_file_uses_is_documented_in_env_example(env):
    used = set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", COMPOSE.read_text()))
    assert used - set(env) == set(), "document these in .env.example"


def test_redis_password_reaches_redis_and_every_client(compose, env):
    password = env["REDIS_PASSWORD"]
    redis = compose["services"]["redis"]
    assert as_list(redis["command"])[1:3] == ["--requirepass", password]
    assert service_environment(redis, ROOT, env)["REDISCLI_AUTH"] == password
    assert "redis-cli ping" in " ".join(healthcheck_argv(redis))
    for name in ("samplers", "trainer"):
        command = as_list(compose["services"][name]["command"])
        url = command[command.index("--redis-url") + 1]
        assert url == f"redis://:{password}@redis:6379/0"


def test_start_order_is_gated_by_health_and_completion(compose):
    services = compose["services"]
    for name, service in services.items():
        for dependency, spec in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown service {dependency}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert healthcheck_argv(services[dependency]), f"{name} waits for {dependency}'s health check"
            elif condition == "service_completed_successfully":
                assert services[dependency].get("restart") == "no", f"{dependency} must be a one-shot"
            else:
                pytest.fail(f"{name} -> {dependency}: use service_healthy or service_completed_successfully")
    needs = {
        "feature-shard-0": {"prepare-data"},
        "feature-shard-1": {"prepare-data"},
        "ray-head": {"prepare-data"},
        "samplers": {"prepare-data", "redis", "ray-head"},
        "trainer": {"redis", "feature-shard-0", "feature-shard-1", "samplers"},
        "grafana": {"prometheus"},
    }
    for name, deps in needs.items():
        assert deps <= set(services[name]["depends_on"]), f"{name} must wait for {deps}"
    # Every long-running service has a health check.
    for name in ALL_SERVICES - {"prepare-data"}:
        assert healthcheck_argv(services[name]), f"{name} has no health check"


def test_health_checks_probe_the_ports_the_services_listen_on(compose):
    from saintpipe.cli.health_probe import build_parser

    services = compose["services"]
    for name in ("feature-shard-0", "feature-shard-1"):
        argv = healthcheck_argv(services[name])
        assert argv[:3] == ["python", "-m", "saintpipe.cli.health_probe"]
        probe = build_parser().parse_args(argv[3:])
        command = as_list(services[name]["command"])
        assert probe.kind == "grpc" and probe.target == f"127.0.0.1:{command[command.index('--port') + 1]}"
    for name in ("samplers", "trainer"):
        probe = build_parser().parse_args(healthcheck_argv(services[name])[3:])
        command = as_list(services[name]["command"])
        assert probe.kind == "http"
        assert probe.target == f"127.0.0.1:{command[command.index('--metrics-port') + 1]}/metrics"
    assert healthcheck_argv(services["ray-head"])[:2] == ["ray", "health-check"]


def test_one_shared_dataset_volume_written_once_read_only_elsewhere(compose):
    assert "saintpipe-data" in compose["volumes"]
    services = compose["services"]
    assert services["prepare-data"]["volumes"] == ["saintpipe-data:/data"]
    for name in SAINTPIPE_SERVICES - {"prepare-data"}:
        assert services[name]["volumes"][0] == "saintpipe-data:/data:ro", name
        assert services[name]["volumes"][1:] == (["trainer-checkpoints:/checkpoints"] if name == "trainer" else [])
    prepare = as_list(services["prepare-data"]["command"])
    out = prepare[prepare.index("--out") + 1]
    for name in ("feature-shard-0", "feature-shard-1", "samplers", "trainer"):
        command = as_list(services[name]["command"])
        assert command[command.index("--data") + 1] == out, name


def test_feature_shards_cover_every_shard_and_the_trainer_names_them_all(compose):
    services = compose["services"]
    prepare = as_list(services["prepare-data"]["command"])
    num_shards = int(prepare[prepare.index("--shards") + 1])
    addresses = []
    for k in range(num_shards):
        command = as_list(services[f"feature-shard-{k}"]["command"])
        assert command[command.index("--shard") + 1] == str(k)
        addresses.append(f"feature-shard-{k}:{command[command.index('--port') + 1]}")
    trainer = as_list(services["trainer"]["command"])
    assert trainer[trainer.index("--features") + 1] == ";".join(addresses)


def test_every_saintpipe_container_runs_the_one_image(compose):
    images = {compose["services"][name]["image"] for name in SAINTPIPE_SERVICES}
    assert images == {"saintpipe:latest"}
    for name in SAINTPIPE_SERVICES:
        build = compose["services"][name]["build"]
        assert build["dockerfile"] == "deploy/Dockerfile" and (ROOT / build["context"] / build["dockerfile"]).is_file()
        assert (ROOT / compose["services"][name]["env_file"]).is_file()


def test_ray_nodes_share_the_token_and_the_sampler_node_joins_the_head(compose, env):
    services = compose["services"]
    for name in ("ray-head", "samplers"):
        node_env = service_environment(services[name], ROOT, env)
        assert node_env["RAY_AUTH_MODE"] == "token" and node_env["RAY_AUTH_TOKEN"] == env["RAY_AUTH_TOKEN"]
    head = as_list(services["ray-head"]["command"])
    assert head[:3] == ["ray", "start", "--head"] and "--port=6379" in head and "--block" in head
    entry = as_list(services["samplers"]["entrypoint"])
    assert entry[:2] == ["sh", "-c"] and "ray start --address=ray-head:6379" in entry[2]
    assert 'exec "$@"' in entry[2], "the entrypoint must hand over to the service command"
    command = as_list(services["samplers"]["command"])
    assert command[command.index("--ray-address") + 1] == "ray-head:6379"
    cpus = service_environment(services["samplers"], ROOT, env)["SAMPLER_CPUS"]
    assert command[command.index("--workers") + 1] == cpus, "one CPU per sampler actor on the sampler node"


def test_grafana_is_provisioned_and_opens_on_the_saintpipe_dashboard(compose, env):
    grafana = compose["services"]["grafana"]
    mounts = {}
    for volume in grafana["volumes"]:
        source, target = volume.split(":")[:2]
        mounts[target] = ROOT / source
        assert (ROOT / source).is_dir(), source
    home = service_environment(grafana, ROOT, env)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    home_dir, home_file = home.rsplit("/", 1)
    assert (mounts[home_dir] / home_file).is_file()
    assert json.loads((mounts[home_dir] / home_file).read_text())["uid"] == "saintpipe"
    assert (mounts["/etc/grafana/provisioning"] / "datasources" / "prometheus.yml").is_file()
    assert (mounts["/etc/grafana/provisioning"] / "dashboards" / "saintpipe.yml").is_file()
    prometheus = compose["services"]["prometheus"]
    source = prometheus["volumes"][0].split(":")[0]
    assert (ROOT / source) == ROOT / "deploy" / "prometheus" / "prometheus.yml"
    # Published ports stay on loopback.
    for name in ("grafana", "prometheus"):
        for port in compose["services"][name]["ports"]:
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_state_that_a_restart_must_find_again_lives_on_volumes(compose):
    services = compose["services"]
    redis_command = as_list(services["redis"]["command"])
    assert redis_command[redis_command.index("--appendonly") + 1] == "yes"  # the pool survives a Redis restart
    assert "redis-data:/data" in services["redis"]["volumes"]
    trainer = as_list(services["trainer"]["command"])
    assert trainer[trainer.index("--checkpoint-dir") + 1] == "/checkpoints"  # a restarted trainer resumes
    assert {"redis-data", "trainer-checkpoints"} <= set(compose["volumes"])
