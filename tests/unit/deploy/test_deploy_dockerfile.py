"""deploy/Dockerfile and .dockerignore: the one image gets what it needs, and only that.

No Docker engine here, so the build inputs are checked statically: every COPY
source exists and survives .dockerignore (evaluated with Docker's rules: the
last matching pattern wins, a pattern matching a directory covers its
contents, `!` re-includes), the default torch is the project's CPU pin, and
the image runs as an unprivileged user with no ENTRYPOINT in the way of each
service's command.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def _pattern_regex(pattern: str) -> re.Pattern:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def dockerignore_rules() -> list[tuple[bool, re.Pattern]]:
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        rules.append((negate, _pattern_regex(line.lstrip("!").strip("/"))))
    return rules


def in_build_context(path: str, rules=None) -> bool:
    """Whether Docker sends ``path`` (relative to the repo root) in the build context."""
    rules = dockerignore_rules() if rules is None else rules
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for negate, regex in rules:
        if any(regex.match(prefix) for prefix in prefixes):
            excluded = not negate
    return not excluded


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line and (ROOT / line).exists()]


def copy_sources() -> list[str]:
    sources = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY "):
            args = [a for a in line.split()[1:] if not a.startswith("--")]
            sources.extend(args[:-1])
    return sources


def test_every_copy_source_exists_and_is_in_the_build_context():
    sources = copy_sources()
    assert {"pyproject.toml", "saintpipe", "services"} <= set(sources)
    rules = dockerignore_rules()
    for source in sources:
        assert (ROOT / source).exists(), f"deploy/Dockerfile copies {source}, which the repository lacks"
        files = [source] if (ROOT / source).is_file() else [f for f in tracked_files() if f.startswith(source + "/")]
        assert files, f"{source} is empty"
        for file in files:
            if "__pycache__" in file or file.endswith(".pyc"):
                continue
            assert in_build_context(file, rules), f".dockerignore drops {file}, which the image needs"


def test_dockerignore_keeps_the_context_small():
    rules = dockerignore_rules()
    for path in (".git/HEAD", ".venv/bin/python", "tests/data/cora.npz", "helm/saintpipe/Chart.yaml",
                 "docs/metrics.md", "services/__pycache__/x.cpython-311.pyc", ".env"):
        assert not in_build_context(path, rules), path
    assert in_build_context("saintpipe/cli/health_probe.py", rules)
    included = [f for f in tracked_files() if in_build_context(f, rules)]
    assert included and all(f.split("/")[0] in {"saintpipe", "services", "trainer", "protos", "pyproject.toml",
                                                  "README.md"} for f in included)


def test_default_torch_is_the_projects_cpu_pin():
    text = DOCKERFILE.read_text()
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch_pin,) = [p for p in pins if p.startswith("torch==")]
    assert f"ARG TORCH_VERSION={torch_pin.split('==')[1]}" in text
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in text
    assert "ARG BASE_IMAGE=python:3.11-slim" in text and "FROM ${BASE_IMAGE}" in text


def test_image_runs_any_service_as_an_unprivileged_user():
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    assert not any(line.startswith("ENTRYPOINT") for line in lines), "each service picks its own command"
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert any(line.startswith("CMD ") for line in lines)
