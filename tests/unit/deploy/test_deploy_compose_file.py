"""docker-compose.yml: valid against the Compose Specification, wired consistently.

There is no Docker engine here, so the file is checked the way Compose reads
it: interpolated with the committed .env.example, validated against the
Compose Specification's JSON schema (vendored: tests/data/README.md), then its
start order, health checks, volumes, ports, resource limits and the way
secrets travel (environment only, never argv) cross-checked. The running stack
is tested under a real Docker Engine by tests/e2e/compose/.
"""

from __future__ import annotations

import hashlib
import json
import logging
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
    parse_volume,
    read_env_file,
    service_environment,
)

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
GPU_OVERRIDE = ROOT / "deploy" / "compose.gpu.yml"
ENV_EXAMPLE = ROOT / ".env.example"
SCHEMA = ROOT / "tests" / "data" / "compose-spec.json"
SCHEMA_SHA256 = "344712b36ae1900fa40cb484f45469e5ea8b2e4f49690d8c03776eb63fa6a1b1"

SAINTPIPE_SERVICES = {"prepare-data", "certs", "feature-shard-0", "feature-shard-1", "ray-head", "samplers",
                      "sampler-node", "trainer", "sweep"}
ALL_SERVICES = SAINTPIPE_SERVICES | {"redis", "prometheus", "grafana"}
PROFILED = {"sweep": ["sweep"]}  # services a plain `docker compose up` leaves out, and their profiles
RAY_NODES = {"ray-head", "samplers", "sampler-node"}
POOL_CLIENTS = {"samplers", "trainer", "sweep"}
SECRETS = ("REDIS_PASSWORD", "RAY_AUTH_TOKEN", "GRAFANA_ADMIN_PASSWORD")


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return read_env_file(ENV_EXAMPLE)


@pytest.fixture(scope="module")
def compose(env) -> dict:
    return load_compose(COMPOSE, env)


def _with(env: dict[str, str], **overrides: str) -> dict:
    """The compose file interpolated with .env.example's values, some of them replaced."""
    return load_compose(COMPOSE, {**env, **overrides})


def _flag(argv: list[str], flag: str) -> str:
    """The value after ``flag`` (``--flag VALUE``) or in ``--flag=VALUE``."""
    for i, arg in enumerate(argv):
        if arg == flag:
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"{flag} missing from {argv}")


def _argv(service: dict) -> list[str]:
    """What the container's main process gets: entrypoint then command."""
    return as_list(service.get("entrypoint")) + as_list(service.get("command"))


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
    assert {"SAINTPIPE_DATA", "DATASET", "JOB", "EPOCHS", "PATIENCE"} <= used
    # .env.example shows each default the file uses: copying it unchanged changes nothing.
    for name, default in re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}", COMPOSE.read_text()):
        assert env[name] == default, f".env.example: {name}={env[name]}, docker-compose.yml defaults to {default}"
    assert load_compose(COMPOSE, {k: env[k] for k in SECRETS}) == load_compose(COMPOSE, env)


def test_redis_password_reaches_redis_and_every_client_through_the_environment(compose, env):
    from saintpipe.services.pool.redis_server import ENV_URL

    password = env["REDIS_PASSWORD"]
    services = compose["services"]
    redis = services["redis"]
    redis_env = service_environment(redis, ROOT, env)
    assert redis_env["REDIS_PASSWORD"] == password and redis_env["REDISCLI_AUTH"] == password
    # The entrypoint writes the password from the environment into a private config file that redis-server
    # reads, then hands over to it with the service's arguments (run under sh in test_deploy_service_commands).
    entry = as_list(redis["entrypoint"])
    assert entry[:2] == ["sh", "-c"]
    assert "umask 077" in entry[2] and "requirepass" in entry[2] and '"$REDIS_PASSWORD"' in entry[2]
    assert 'exec redis-server /tmp/redis.conf "$@"' in entry[2]
    assert "redis-cli ping" in " ".join(healthcheck_argv(redis))
    for name in POOL_CLIENTS:
        client_env = service_environment(services[name], ROOT, env)
        assert client_env[ENV_URL] == f"redis://:{password}@redis:6379/0", name
        assert "--redis-url" not in _argv(services[name]), f"{name}: the URL holds the password; not in argv"
    # Nobody else gets the pool's credentials.
    holders = {name for name, s in services.items() if ENV_URL in service_environment(s, ROOT, env)}
    assert holders == POOL_CLIENTS


def test_no_secret_is_in_any_command_line(env):
    # Distinct values, so that a hit cannot be a coincidence; every one of them does reach some environment.
    secrets = {name: f"s3cr3t-{name.lower()}-7f1c" for name in SECRETS}
    compose = _with(env, **secrets)
    reached = set()
    for name, service in compose["services"].items():
        argv = " ".join(_argv(service) + healthcheck_argv(service))
        for secret, value in secrets.items():
            assert value not in argv, f"{name}: {secret} in its command line (argv is visible to `ps`)"
        environment = " ".join(service_environment(service, ROOT, env).values())
        reached |= {secret for secret, value in secrets.items() if value in environment}
        assert "--redis-url" not in argv and "--requirepass" not in argv, name
    assert reached == set(SECRETS)
    # The token goes to the Ray nodes only.
    holders = {name for name, s in compose["services"].items()
               if secrets["RAY_AUTH_TOKEN"] in service_environment(s, ROOT, env).values()}
    assert holders == RAY_NODES


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
        "sweep": {"redis", "feature-shard-0", "feature-shard-1", "samplers"},
        "feature-shard-0": {"prepare-data", "certs"},
        "feature-shard-1": {"prepare-data", "certs"},
        "samplers": {"prepare-data", "redis", "ray-head"},
        "sampler-node": {"prepare-data", "ray-head"},
        "trainer": {"redis", "feature-shard-0", "feature-shard-1", "samplers"},
        "grafana": {"prometheus"},
    }
    for name, deps in needs.items():
        assert deps <= set(services[name]["depends_on"]), f"{name} must wait for {deps}"
    assert services["sampler-node"]["depends_on"]["ray-head"]["condition"] == "service_healthy"
    # Every long-running service has a health check, but the second sampler node: a bare Ray node that nothing
    # waits for (the samplers place their actors on whichever nodes have joined).
    # The sweep is a one-shot too (nothing waits for it).
    for name in ALL_SERVICES - {"prepare-data", "certs", "sampler-node", "sweep"}:
        assert healthcheck_argv(services[name]), f"{name} has no health check"
    assert services["sweep"]["restart"] == "no"
    assert not any("sampler-node" in (s.get("depends_on") or {}) for s in services.values())


def test_health_checks_probe_the_ports_the_services_listen_on(compose):
    from saintpipe.cli.health_probe import build_parser

    services = compose["services"]
    for name in ("feature-shard-0", "feature-shard-1"):
        argv = healthcheck_argv(services[name])
        assert argv[:3] == ["python", "-m", "saintpipe.cli.health_probe"]
        probe = build_parser().parse_args(argv[3:])
        command = as_list(services[name]["command"])
        assert probe.kind == "grpc" and probe.target == f"127.0.0.1:{command[command.index('--port') + 1]}"
        assert probe.tls_ca == "/certs/ca.crt"  # the shards speak TLS only
    for name in ("samplers", "trainer"):
        probe = build_parser().parse_args(healthcheck_argv(services[name])[3:])
        command = as_list(services[name]["command"])
        assert probe.kind == "http"
        assert probe.target == f"127.0.0.1:{command[command.index('--metrics-port') + 1]}/metrics"
    assert healthcheck_argv(services["ray-head"])[:2] == ["ray", "health-check"]


@pytest.mark.parametrize("data_source", ["saintpipe-data", "/srv/graphs"])
def test_one_data_directory_written_only_by_prepare_data_read_only_elsewhere(env, data_source):
    # SAINTPIPE_DATA: the named volume (default) or a host directory holding the user's own dataset.
    services = _with(env, SAINTPIPE_DATA=data_source)["services"]
    assert env["SAINTPIPE_DATA"] == "saintpipe-data"
    for name, service in services.items():
        mounts = [parse_volume(v) for v in service.get("volumes", [])]
        data = [m for m in mounts if m.source == data_source]
        if name in SAINTPIPE_SERVICES - {"certs"}:  # the certificates' one-shot reads no data
            assert len(data) == 1 and data[0].target == "/data", f"{name}: {mounts}"
            assert data[0].read_only == (name != "prepare-data"), f"{name}: {data[0]}"
        else:
            assert not data, f"{name} mounts the data directory"
            assert name == "redis" or not any(m.target == "/data" for m in mounts), name
    assert services["prepare-data"]["volumes"] == [f"{data_source}:/data"]


@pytest.mark.parametrize("dataset", ["demo", "products"])
def test_every_service_reads_the_dataset_prepare_data_writes(env, dataset):
    services = _with(env, DATASET=dataset)["services"]
    out = _flag(as_list(services["prepare-data"]["command"]), "--out")
    assert out == f"/data/{dataset}"
    for name in ("feature-shard-0", "feature-shard-1", "samplers", "trainer"):
        assert _flag(as_list(services[name]["command"]), "--data") == out, name


def test_prepare_data_keeps_an_existing_dataset(compose):
    from saintpipe.cli import build_parser

    command = as_list(compose["services"]["prepare-data"]["command"])
    assert "--keep-existing" in command and "--force" not in command, "a later `up` must not regenerate the data"
    args = build_parser().parse_args(command[1:])
    assert args.keep_existing and not args.force
    assert compose["services"]["prepare-data"]["restart"] == "no"


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


def test_ray_nodes_share_the_token_and_the_sampler_nodes_join_the_head(compose, env):
    services = compose["services"]
    for name in RAY_NODES:
        node_env = service_environment(services[name], ROOT, env)
        assert node_env["RAY_AUTH_MODE"] == "token" and node_env["RAY_AUTH_TOKEN"] == env["RAY_AUTH_TOKEN"], name
    head = as_list(services["ray-head"]["command"])
    assert head[:3] == ["ray", "start", "--head"] and "--port=6379" in head and "--block" in head
    assert _flag(head, "--num-cpus") == env["RAY_HEAD_CPUS"] == "0", "sampler actors stay off the head"
    entry = as_list(services["samplers"]["entrypoint"])
    assert entry[:2] == ["sh", "-c"] and "ray start --address=ray-head:6379" in entry[2]
    assert 'exec "$@"' in entry[2], "the entrypoint must hand over to the service command"
    command = as_list(services["samplers"]["command"])
    assert _flag(command, "--ray-address") == "ray-head:6379"
    cpus = service_environment(services["samplers"], ROOT, env)["SAMPLER_CPUS"]
    assert _flag(command, "--workers") == cpus == env["SAMPLER_WORKERS"], "one CPU per sampler actor"
    # The second sampler node: a plain Ray node joined to the head, kept in the foreground (--block), with as
    # many CPUs as there are workers, so that either node can take all of them.
    node = services["sampler-node"]
    node_command = as_list(node["command"])
    assert node_command[:2] == ["sh", "-c"] and len(node_command) == 3
    assert node_command[2].startswith("exec ray start --address=ray-head:6379 ") and "--block" in node_command[2]
    assert service_environment(node, ROOT, env)["SAMPLER_CPUS"] == cpus
    assert "--head" not in node_command[2] and "entrypoint" not in node
    # Distinct hostnames name the two sampler nodes in the supervisor's placement log.
    assert services["samplers"]["hostname"] == "samplers" and node["hostname"] == "sampler-node"


def test_every_service_has_cpu_and_memory_limits(compose):
    for name, service in compose["services"].items():
        limits = ((service.get("deploy") or {}).get("resources") or {}).get("limits") or {}
        assert float(limits.get("cpus", 0)) > 0, f"{name}: no CPU limit"
        memory = str(limits.get("memory", ""))
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([bkmg])b?", memory.lower())
        assert match and float(match.group(1)) > 0, f"{name}: memory limit {memory!r}"


def test_saintpipe_containers_log_at_info(compose, env):
    from saintpipe.cli import LOG_LEVEL_ENV, log_level

    for name in SAINTPIPE_SERVICES:
        environment = service_environment(compose["services"][name], ROOT, env)
        assert environment[LOG_LEVEL_ENV] == "INFO" and log_level(0, environment) == logging.INFO, name
        assert log_level(2, environment) == logging.DEBUG, "-vv on a command line still wins"


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
    assert _flag(redis_command, "--appendonly") == "yes"  # the pool survives a Redis restart
    assert _flag(redis_command, "--dir") == "/data" and "redis-data:/data" in services["redis"]["volumes"]
    assert set(compose["volumes"]) == {"saintpipe-data", "redis-data", "saintpipe-runs", "saintpipe-certs",
                                       "prometheus-data"}
    # Every named volume a service mounts is declared, and every declared one is mounted.
    named = {parse_volume(v).source for s in services.values() for v in s.get("volumes", [])}
    named = {source for source in named if not source.startswith((".", "/"))}
    assert named == set(compose["volumes"])


@pytest.mark.parametrize("job", ["demo", "cora-sage"])
def test_the_trainer_trains_job_to_the_end_and_keeps_its_model_in_saintpipe_runs(env, job):
    from saintpipe.trainer.config import TrainerConfig

    from saintpipe.core.config import load_config

    services = _with(env, JOB=job)["services"]
    trainer = services["trainer"]
    mounts = {m.target: m for m in map(parse_volume, trainer["volumes"])}
    assert mounts["/runs"].source == "saintpipe-runs" and not mounts["/runs"].read_only
    assert not any(m.source == "saintpipe-runs" for name, s in services.items() if name not in ("trainer", "sweep")
                   for m in map(parse_volume, s.get("volumes", [])))
    command = as_list(trainer["command"])
    checkpoint_dir = _flag(command, "--checkpoint-dir")
    assert checkpoint_dir == f"/runs/{job}", "a restarted trainer resumes from the job's own directory"
    assert _flag(command, "--job") == job == _flag(as_list(services["samplers"]["command"]), "--job")
    # The settings the trainer ends up with: flags over SAINTPIPE_TRAINER__* over defaults, as `serve trainer`
    # builds them.
    environment = service_environment(trainer, ROOT, env)
    assert environment["SAINTPIPE_TRAINER__PATIENCE"] == env["PATIENCE"]
    config = load_config(TrainerConfig, flags={"epochs": int(_flag(command, "--epochs")),
                                               "checkpoint_dir": checkpoint_dir},
                         environ=environment, section="trainer")
    assert config.epochs == int(env["EPOCHS"]) and config.patience == int(env["PATIENCE"])
    assert str(config.checkpoint_dir) == f"/runs/{job}"


def test_epochs_and_patience_come_from_the_env_file(env):
    from saintpipe.trainer.config import TrainerConfig

    from saintpipe.core.config import load_config

    trainer = _with(env, EPOCHS="500", PATIENCE="0")["services"]["trainer"]
    environment = service_environment(trainer, ROOT, env)
    config = load_config(TrainerConfig, flags={"epochs": int(_flag(as_list(trainer["command"]), "--epochs"))},
                         environ=environment, section="trainer")
    assert (config.epochs, config.patience) == (500, 0)


def test_feature_shards_speak_tls_with_a_token_only_the_trainer_holds(compose):
    services = compose["services"]
    certs = as_list(services["certs"]["command"])
    assert certs[:3] == ["saintpipe", "certs", "generate"] and "--token" in certs and "--keep-existing" in certs
    hosts = {certs[i + 1] for i, a in enumerate(certs) if a == "--host"}
    assert hosts == {"feature-shard-0", "feature-shard-1"}, "the certificate must name every shard"
    assert services["certs"]["volumes"] == ["saintpipe-certs:/certs"] and services["certs"]["restart"] == "no"
    for name in ("feature-shard-0", "feature-shard-1"):
        command = as_list(services[name]["command"])
        assert _flag(command, "--tls-cert") == "/certs/server.crt" and _flag(command, "--tls-key") == "/certs/server.key"
        assert _flag(command, "--token-file") == "/certs/token"
        assert "saintpipe-certs:/certs:ro" in services[name]["volumes"]
    trainer = as_list(services["trainer"]["command"])
    assert _flag(trainer, "--feature-tls-ca") == "/certs/ca.crt" and _flag(trainer, "--feature-token-file") == "/certs/token"
    holders = {name for name, s in services.items() if any("saintpipe-certs" in str(v) for v in s.get("volumes", []))}
    assert holders == {"certs", "feature-shard-0", "feature-shard-1", "trainer", "sweep"}


def test_a_plain_up_starts_what_it_always_did_and_the_sweep_only_under_its_profile(compose):
    profiled = {name: s["profiles"] for name, s in compose["services"].items() if s.get("profiles")}
    assert profiled == PROFILED


@pytest.mark.parametrize("job, dataset", [("demo", "demo"), ("cora-sage", "products")])
def test_the_sweep_runs_against_the_stack_as_the_trainer_reaches_it(env, job, dataset):
    from saintpipe.sweep.config import check_space
    from saintpipe.sweep.driver import load_sweep

    from tests.support.compose import parse_volume

    services = _with(env, JOB=job, DATASET=dataset)["services"]
    sweep, trainer = services["sweep"], services["trainer"]
    assert sweep["image"] == trainer["image"] and sweep["env_file"] == trainer["env_file"]
    command, trained = as_list(sweep["command"]), as_list(trainer["command"])
    assert command[:2] == ["saintpipe", "sweep"]
    # The trainer's addresses, dataset, job, CA and token: the trials train on the stack's subgraphs.
    for flag in ("--features", "--data", "--job", "--feature-tls-ca", "--feature-token-file"):
        assert _flag(command, flag) == _flag(trained, flag), flag
    assert _flag(command, "--job") == _flag(as_list(services["samplers"]["command"]), "--job") == job
    environment = service_environment(sweep, ROOT, env)
    assert environment["SAINTPIPE_HOME"] == "/runs"  # the sweep directories: /runs/sweeps/<time>-<job>
    mounts = {m.target: m for m in map(parse_volume, sweep["volumes"])}
    assert mounts["/runs"].source == "saintpipe-runs" and not mounts["/runs"].read_only
    assert mounts["/certs"].read_only and mounts["/data"].read_only
    sweep_file = mounts[_flag(command, "--config")]
    assert sweep_file.read_only and sweep_file.source == env["SWEEP_FILE"] == "./deploy/sweep.toml"
    # The shipped example is a sweep file the command accepts: on the stack's services, its space checked.
    flags = {"sweep": {"features": _flag(command, "--features")}, "pool": {"job_id": _flag(command, "--job")},
             "trainer": {"feature_tls_ca": _flag(command, "--feature-tls-ca"),
                         "feature_token_file": _flag(command, "--feature-token-file")}}
    config = load_sweep(ROOT / sweep_file.source, Path(_flag(command, "--data")), None, environ=environment,
                        flags=flags)
    assert config.sweep.features == "feature-shard-0:50051;feature-shard-1:50051"
    assert config.pool.job_id == job and str(config.run.data) == f"/data/{dataset}"
    assert len(check_space(config)) == 2 and config.trials_at_a_time() == 2


def test_a_sweep_file_without_the_stack_s_redis_is_refused_before_anything_starts(env):
    from saintpipe.core.errors import ConfigError
    from saintpipe.sweep.driver import load_sweep

    sweep = _with(env)["services"]["sweep"]
    environment = service_environment(sweep, ROOT, env)
    del environment["SAINTPIPE_REDIS_URL"]
    with pytest.raises(ConfigError, match=r"--features .*also needs --redis-url \(or SAINTPIPE_REDIS_URL\)"):
        load_sweep(ROOT / "deploy" / "sweep.toml", Path("/data/demo"), None, environ=environment,
                   flags={"sweep": {"features": "feature-shard-0:50051"}})
