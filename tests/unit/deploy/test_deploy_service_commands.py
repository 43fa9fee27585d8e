"""Every command that docker-compose.yml and the Helm chart start parses with the real parsers.

The commands go through a real ``sh`` (the same shell wrappers the containers
use: the samplers' ``ray start ... && exec "$@"``, the second sampler node's
``exec ray start ... --block``, Redis writing its password into a config file,
the feature shard's ordinal from its hostname) with ``saintpipe``, ``ray`` and
``redis-server`` replaced on PATH by stubs that record their argv: no secret
may reach any of them as an argument. Each recorded ``saintpipe`` argv is then parsed
by ``saintpipe.cli.build_parser()``, each ``ray`` argv by Ray's own click
commands. A service whose ``saintpipe serve ...`` command is not registered
yet fails here by name: that is the signal that the compose file and the chart
are ahead of the code.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.compose import as_list, healthcheck_argv, load_compose, read_env_file, service_environment

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm" / "saintpipe"
RECORD_SEP, UNIT_SEP = "\x1e", "\x1f"

STUB = """#!/bin/sh
# Records its own name and argv, then succeeds.
{ printf '%s\\037' "$(basename "$0")"; for a in "$@"; do printf '%s\\037' "$a"; done; printf '\\036'; } >> "$CAPTURE"
"""


@pytest.fixture(scope="module")
def stub_path(tmp_path_factory) -> Path:
    bin_dir = tmp_path_factory.mktemp("stubs")
    for name in ("saintpipe", "ray", "redis-server"):
        (bin_dir / name).write_text(STUB)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_in_shell(argv: list[str], env: dict[str, str], stub_path: Path, tmp_path: Path) -> list[list[str]]:
    """Run ``argv`` (a container's entrypoint + command) with stubbed saintpipe/ray; return what they received."""
    capture = tmp_path / f"capture-{len(list(tmp_path.iterdir()))}"
    capture.touch()
    full_env = {"PATH": f"{stub_path}:/usr/bin:/bin", "CAPTURE": str(capture), **env}
    if argv[0] not in ("sh", "saintpipe", "ray"):
        pytest.fail(f"unexpected executable {argv[0]!r}: containers start saintpipe or ray (Redis: redis-server), "
                    "possibly via sh")
    proc = subprocess.run(argv, env=full_env, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, f"{argv} failed: {proc.stderr}"
    records = capture.read_text().split(RECORD_SEP)
    return [record.split(UNIT_SEP)[:-1] for record in records if record]


def parse_saintpipe(argv: list[str]) -> None:
    from saintpipe.cli import build_parser

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"`saintpipe {' '.join(argv)}` does not parse (exit {exc.code}): {stderr.getvalue().strip()}")
    assert callable(getattr(args, "func", None)), f"`saintpipe {' '.join(argv)}` selects no handler"


def parse_ray(argv: list[str]) -> None:
    import click
    from ray.scripts.scripts import cli

    command = cli.get_command(click.Context(cli), argv[0])
    assert command is not None, f"ray has no command {argv[0]!r}"
    try:
        command.make_context(argv[0], list(argv[1:]))
    except click.exceptions.ClickException as exc:
        pytest.fail(f"`ray {' '.join(argv)}` does not parse: {exc.format_message()}")


def check_invocations(invocations: list[list[str]]) -> set[str]:
    """Parse each recorded invocation; returns the saintpipe subcommands seen (e.g. 'serve trainer')."""
    assert invocations, "the command started neither saintpipe nor ray"
    seen = set()
    for program, *argv in invocations:
        if program == "saintpipe":
            parse_saintpipe(argv)
            seen.add(" ".join(a for a in argv[:3] if not a.startswith("-")))
        else:
            parse_ray(argv)
            seen.add(f"ray {argv[0]}")
    return seen


# ---------------------------------------------------------------- compose

COMPOSE_ENV = read_env_file(ROOT / ".env.example")
COMPOSE = load_compose(ROOT / "docker-compose.yml", COMPOSE_ENV)
SAINTPIPE_SERVICES = [name for name, s in COMPOSE["services"].items() if s.get("image", "").startswith("saintpipe")]
EXPECTED_COMPOSE = {
    "prepare-data": {"data generate demo"},
    "certs": {"certs generate"},
    "feature-shard-0": {"serve feature-shard"},
    "feature-shard-1": {"serve feature-shard"},
    "ray-head": {"ray start"},
    "samplers": {"ray start", "serve samplers"},
    "sampler-node": {"ray start"},
    "trainer": {"serve trainer"},
    "sweep": {"sweep /etc/saintpipe/sweep.toml"},
}
SECRET_VALUES = [COMPOSE_ENV[name] for name in ("REDIS_PASSWORD", "RAY_AUTH_TOKEN", "GRAFANA_ADMIN_PASSWORD")]


def compose_invocations(name: str, stub_path: Path, tmp_path: Path) -> list[list[str]]:
    """What the stubs received when service ``name``'s entrypoint + command ran with its environment."""
    service = COMPOSE["services"][name]
    argv = as_list(service.get("entrypoint")) + as_list(service["command"])
    env = service_environment(service, ROOT, COMPOSE_ENV)
    return run_in_shell(argv, env, stub_path, tmp_path)


def assert_no_secret(invocations: list[list[str]]) -> None:
    for invocation in invocations:
        for value in SECRET_VALUES:
            assert not any(value in arg for arg in invocation), f"a secret in the argv of {invocation[0]}"


def test_compose_lists_the_saintpipe_services_this_test_knows():
    assert sorted(SAINTPIPE_SERVICES) == sorted(EXPECTED_COMPOSE)


@pytest.mark.parametrize("name", sorted(EXPECTED_COMPOSE))
def test_compose_service_command_parses(name, stub_path, tmp_path):
    invocations = compose_invocations(name, stub_path, tmp_path)
    assert check_invocations(invocations) == EXPECTED_COMPOSE[name]
    assert_no_secret(invocations)


def test_compose_sampler_nodes_join_the_ray_head_with_a_cpu_per_worker(stub_path, tmp_path):
    workers = COMPOSE_ENV["SAMPLER_WORKERS"]
    # The samplers' node joins and returns (then the supervisor runs in its place); the second node stays in the
    # foreground as the container's main process.
    (join, serve) = compose_invocations("samplers", stub_path, tmp_path)
    assert join[:2] == ["ray", "start"] and "--address=ray-head:6379" in join and "--block" not in join
    assert f"--num-cpus={workers}" in join
    assert serve[:3] == ["saintpipe", "serve", "samplers"]
    assert serve[serve.index("--workers") + 1] == workers
    (node,) = compose_invocations("sampler-node", stub_path, tmp_path)
    assert node[:2] == ["ray", "start"] and "--address=ray-head:6379" in node and "--block" in node
    assert f"--num-cpus={workers}" in node and "--head" not in node


def test_compose_redis_reads_its_password_from_a_private_config_file(stub_path, tmp_path):
    service = COMPOSE["services"]["redis"]
    entry = as_list(service["entrypoint"])
    # The script writes /tmp/redis.conf and hands it to redis-server; here it goes to a temporary directory.
    assert entry[:2] == ["sh", "-c"] and entry[2].count("/tmp/redis.conf") == 2
    conf = tmp_path / "conf" / "redis.conf"
    conf.parent.mkdir()
    argv = entry[:2] + [entry[2].replace("/tmp/redis.conf", str(conf))] + entry[3:] + as_list(service["command"])
    # A real password: .env.example's placeholder is refused (next test).
    env = {**service_environment(service, ROOT, COMPOSE_ENV), "REDIS_PASSWORD": "9d1f0c6e2b7a48c1"}
    (invocation,) = run_in_shell(argv, env, stub_path, tmp_path)
    assert invocation == ["redis-server", str(conf), *as_list(service["command"])]
    assert "9d1f0c6e2b7a48c1" not in " ".join(invocation)
    assert conf.read_text() == 'requirepass "9d1f0c6e2b7a48c1"\n'
    assert conf.stat().st_mode & 0o777 == 0o600, "only the redis user may read the password"


@pytest.mark.parametrize("name", sorted(EXPECTED_COMPOSE))
def test_compose_health_check_command_parses(name):
    argv = healthcheck_argv(COMPOSE["services"][name])
    if not argv:
        # The one-shots: they must exit 0 instead.
        assert name in ("prepare-data", "certs", "sweep")
        return
    if argv[0] == "ray":
        parse_ray(argv[1:])
    else:
        from saintpipe.cli.health_probe import build_parser

        assert argv[:3] == ["python", "-m", "saintpipe.cli.health_probe"]
        build_parser().parse_args(argv[3:])


# ---------------------------------------------------------------- helm

def _render(values: dict | None) -> list[dict]:
    import helm_python as helm

    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values, name="rel", namespace="ml", is_install=True)
    docs = []
    for name, text in rendered.items():
        if name.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def _k8s_expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command/args/env values ($$ escapes)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


def _container_env(container: dict) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "fieldRef" in item.get("valueFrom", {}):  # the downward API: the indexed Job's completion index
            env[item["name"]] = "0"
        elif "valueFrom" in item:
            env[item["name"]] = f"secret-{item['name'].lower()}"
        else:
            env[item["name"]] = _k8s_expand(item["value"], env)
    return env


def _saintpipe_containers(docs: list[dict]):
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        pod = doc["spec"]["template"]["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            if container["image"].startswith("saintpipe"):
                # A StatefulSet pod's hostname is <name>-<ordinal>.
                hostname = f"{doc['metadata']['name']}-{max(0, int(doc['spec'].get('replicas', 1)) - 1)}"
                yield doc["metadata"]["name"], container, hostname


HELM_VALUES = {
    "default": None,
    "external-redis-gpu-4-shards": {
        "featureShards": {"replicas": 4},
        "redis": {"enabled": False, "external": {"url": "rediss://redis.example.internal:6380/2",
                                                 "auth": {"existingSecret": "pool-redis", "existingSecretKey": "pw"}}},
        "trainer": {"gpu": {"enabled": True}, "replicas": 2,
                    "checkpoints": {"persistence": {"accessMode": "ReadWriteMany"}}},
        "samplers": {"workers": 8},
        "ray": {"workers": {"replicas": 2, "numCpus": 4}},
        "monitoring": {"serviceMonitor": {"enabled": True}},
    },
    "sweep": {"sweep": {"enabled": True}},
}


@pytest.mark.parametrize("case", sorted(HELM_VALUES))
def test_helm_container_commands_parse(case, stub_path, tmp_path):
    seen: dict[str, set[str]] = {}
    for workload, container, hostname in _saintpipe_containers(_render(HELM_VALUES[case])):
        env = _container_env(container)
        argv = [_k8s_expand(a, env) for a in container.get("command", []) + container.get("args", [])]
        invocations = run_in_shell(argv, {**env, "HOSTNAME": hostname}, stub_path, tmp_path)
        seen.setdefault(container["name"], set()).update(check_invocations(invocations))
        for probe in ("readinessProbe", "livenessProbe"):
            exec_argv = container.get(probe, {}).get("exec", {}).get("command")
            if exec_argv and exec_argv[0] == "ray":
                parse_ray(exec_argv[1:])
    readers = {"sweep": {"sweep /etc/saintpipe/sweep.toml"}} if case == "sweep" else {"trainer": {"serve trainer"}}
    assert seen == {
        "prepare-data": {"data generate demo"},
        "feature-shard": {"serve feature-shard"},
        "ray-head": {"ray start"},
        "ray-worker": {"ray start"},
        "samplers": {"ray start", "serve samplers"},
        **readers,
    }


def test_helm_feature_shard_takes_its_shard_from_the_pod_ordinal(stub_path, tmp_path):
    docs = _render({"featureShards": {"replicas": 4}})
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"].endswith("feature-shard")]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = _container_env(container)
    for ordinal in range(4):
        hostname = f"{sts['metadata']['name']}-{ordinal}"
        (invocation,) = run_in_shell(container["command"], {**env, "HOSTNAME": hostname}, stub_path, tmp_path)
        assert invocation[invocation.index("--shard") + 1] == str(ordinal)
        assert invocation[invocation.index("--data") + 1] == "/data/demo"


def test_helm_redis_reads_its_password_from_the_secret_file_on_stdin(tmp_path):
    """The chart's Redis command, run by a real sh: the password reaches redis-server on stdin, never in argv."""
    from tests.support.helm import container, manifests, workload

    redis = container(workload(manifests(), "rel-saintpipe-redis"), "redis")
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    password = "s3cr3t-from-the-secret-file"
    (secrets_dir / "redis-password").write_text(password)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A stand-in redis-server that records its argv and the config it was given on stdin.
    (bin_dir / "redis-server").write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$OUT/argv"\ncat > "$OUT/stdin"\n')
    (bin_dir / "redis-server").chmod(0o755)
    argv = [a.replace("/var/run/secrets/saintpipe", str(secrets_dir)) for a in redis["command"]]
    proc = subprocess.run(argv, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(tmp_path)},
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "argv").read_text().split() == ["-", "--appendonly", "yes", "--dir", "/data"]
    assert (tmp_path / "stdin").read_text() == f'requirepass "{password}"\n'


def test_compose_redis_refuses_the_placeholder_password(stub_path, tmp_path):
    service = COMPOSE["services"]["redis"]
    entry = as_list(service["entrypoint"])
    argv = entry[:2] + [entry[2].replace("/tmp/redis.conf", str(tmp_path / "redis.conf"))] + entry[3:]
    env = {**service_environment(service, ROOT, COMPOSE_ENV), "REDIS_PASSWORD": "change-me-redis"}
    proc = subprocess.run(argv + as_list(service["command"]), env={"PATH": f"{stub_path}:/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 1
    assert "REDIS_PASSWORD is still the placeholder from .env.example" in proc.stderr
    assert not (tmp_path / "redis.conf").exists()
