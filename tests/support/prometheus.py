"""A real Prometheus server for tests: Debian's ``prometheus`` binary on a free loopback port.

The binaries (``prometheus``, ``promtool``) are taken from PATH, else from the
tools folder that ./scripts/tools.sh (run by the README's test command) fills
without root: Debian's prometheus package unpacked into
``$SAINTPIPE_TOOLS_DIR/prometheus`` (default ``$XDG_CACHE_HOME/saintpipe/tools``,
i.e. ``~/.cache/saintpipe/tools``). Without either, the tests skip and say why and what to run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json"))


TOOLS_DIR_ENV = "SAINTPIPE_TOOLS_DIR"


def tools_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where ./scripts/tools.sh puts the tools it fetches (the same rule as the script's)."""
    if environ.get(TOOLS_DIR_ENV):
        return Path(environ[TOOLS_DIR_ENV])
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "saintpipe" / "tools"


def find_prometheus_tool(name: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """``prometheus`` or ``promtool``: on PATH, else unpacked by ./scripts/tools.sh; None when neither."""
    found = shutil.which(name, path=environ.get("PATH"))
    if found:
        return found
    cached = tools_dir(environ) / "prometheus" / "usr" / "bin" / name
    return str(cached) if os.access(cached, os.X_OK) else None


def missing_reason(name: str, environ: Mapping[str, str] = os.environ) -> str:
    """One line: why ``name`` is missing (as ./scripts/tools.sh found it) and what to run."""
    where = tools_dir(environ)
    why = ""
    try:
        why = next((line for line in (where / "missing.txt").read_text().splitlines() if "prometheus" in line), "")
    except OSError:
        pass
    return (f"{name} not found on PATH nor in {where / 'prometheus/usr/bin'}: "
            + (f"./scripts/tools.sh said: {why}" if why else
               "run ./scripts/tools.sh prometheus (Debian/Ubuntu: it fetches Debian's prometheus package with apt-get "
               "download and dpkg-deb -x, no root needed); elsewhere put Prometheus 2.x's prometheus and "
               "promtool on PATH (https://prometheus.io/download/)"))


def prometheus_tool(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``, or a skip that says why it is missing and how to get it."""
    path = find_prometheus_tool(name)
    if path is None:
        pytest.skip(missing_reason(name))
    return path


def prometheus_binary() -> str:
    """The prometheus binary, or a skip that says how to get it."""
    return prometheus_tool("prometheus")


def with_variables(expr: str, dashboard: dict, picked: Mapping[str, str] | None = None) -> str:
    """``expr`` as Grafana sends it: each template variable (``$trial``) replaced by its ``picked`` value, else
    its default ("All": the variable's ``allValue``); the datasource variable is no part of a query."""
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable["type"] == "datasource":
            continue
        value = (picked or {}).get(variable["name"])
        if value is None:
            current = variable.get("current") or {}
            value = variable.get("allValue") if current.get("value") == "$__all" else current.get("value")
        expr = expr.replace(f"${variable['name']}", str(value))
    return expr


def dashboard_queries(picked: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(dashboard / panel [refId], PromQL) of every target of every panel, its variables at their defaults (or
    ``picked``)."""
    out = []
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                out.append((f"{path.name} / {panel['title']} [{target['refId']}]",
                            with_variables(target["expr"], dashboard, picked)))
    return out


class Prometheus:
    """A Prometheus process scraping ``targets`` (host:port of /metrics endpoints) every second, or the targets
    the files matching ``file_sd`` list (file-based discovery, as a sweep's ``prometheus/*.json``), with
    ``honor_labels: true`` there as in the deployments' scrape configurations."""

    def __init__(self, targets: list[str], workdir: Path, port: int, file_sd: str | None = None) -> None:
        config = workdir / "prometheus.yml"
        listed = ", ".join(f"'{t}'" for t in targets)
        discovery = (f"    honor_labels: true\n    file_sd_configs:\n      - files: ['{file_sd}']\n"
                     "        refresh_interval: 1s\n" if file_sd is not None else
                     f"    static_configs:\n      - targets: [{listed}]\n")
        config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          f"scrape_configs:\n  - job_name: saintpipe\n{discovery}")
        self.log_path = workdir / "prometheus.log"
        self._log = self.log_path.open("w")
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [prometheus_binary(), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("prometheus did not become ready")
            time.sleep(0.2)

    def query(self, expr: str) -> list[dict]:
        """The result vector of an instant query (raises on a query error)."""
        params = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{params}", timeout=5) as reply:
                body = json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"query failed ({exc.code}): {expr}: {exc.read()[:300]!r}") from None
        assert body["status"] == "success", body
        return body["data"]["result"]

    def targets_up(self) -> dict[str, str]:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=5) as reply:
            body = json.loads(reply.read())
        return {t["scrapeUrl"]: t["health"] for t in body["data"]["activeTargets"]}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
