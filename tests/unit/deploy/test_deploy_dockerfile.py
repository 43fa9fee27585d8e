"""deploy/Dockerfile and .dockerignore: the one image gets what it needs, and only that.

The build inputs are checked statically (tests/e2e/compose/ builds the image
under a real Docker Engine): every COPY source exists and survives
.dockerignore (evaluated with Docker's rules: the last matching pattern wins, a
pattern matching a directory covers its contents, `!` re-includes), so the
`COPY . /opt/saintpipe/` that `pip install` reads holds every package; the
default torch is the project's CPU pin; an offline build can point pip at a
wheelhouse; the file builds with the classic builder too (no `# syntax=` line,
no BuildKit-only instruction); the image runs as an unprivileged user with no
ENTRYPOINT in the way of each service's command, and its volumes are the
compose file's mount points.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from tests.support.compose import load_compose, parse_volume, read_env_file

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


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as ``(KEYWORD, arguments)``, continuation lines joined, comments dropped."""
    out, current = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # Docker drops comment lines, inside a continuation too
        current = f"{current} {line[:-1].strip()}" if line.endswith("\\") else f"{current} {line}"
        if not line.endswith("\\"):
            keyword, _, args = current.strip().partition(" ")
            out.append((keyword.upper(), args.strip()))
            current = ""
    assert not current, "the Dockerfile ends inside a continuation"
    return out


def copy_sources() -> list[str]:
    sources = []
    for keyword, args in instructions():
        if keyword == "COPY" and "--from=" not in args:  # a COPY --from reads an earlier stage, not the context
            words = [a for a in args.split() if not a.startswith("--")]
            sources.extend(words[:-1])
    return sources


def build_context() -> list[str]:
    rules = dockerignore_rules()
    return [f for f in tracked_files() if in_build_context(f, rules)]


def test_every_copy_source_exists_and_is_in_the_build_context():
    sources = copy_sources()
    assert {"pyproject.toml", "constraints.txt", "."} <= set(sources)
    # The dependency layer copies only what its install reads: editing the README must not reinstall everything.
    assert sources[: sources.index(".")] == ["pyproject.toml", "constraints.txt"]
    rules = dockerignore_rules()
    context = build_context()
    for source in sources:
        assert (ROOT / source).exists(), f"deploy/Dockerfile copies {source}, which the repository lacks"
        if (ROOT / source).is_file():
            assert in_build_context(source, rules), f".dockerignore drops {source}, which the image needs"
        else:
            prefix = "" if source == "." else source.rstrip("/") + "/"
            assert any(f.startswith(prefix) for f in context), f"{source} is empty in the build context"
    # `COPY .` brings what `pip install /opt/saintpipe` builds from: every package folder pyproject.toml maps,
    # with every source file in it.
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir = setuptools["package-dir"]
    for package in setuptools["packages"]:
        root = max((p for p in package_dir if package == p or package.startswith(p + ".")), key=len)
        folder = "/".join([package_dir[root], *package[len(root):].split(".")[1:]])
        assert f"{folder}/__init__.py" in context, f"the image lacks package {package}"
    sources = [f for f in tracked_files() if f.endswith((".py", ".proto", ".lua")) and "__pycache__" not in f
               and f.split("/")[0] in {"saintpipe", "services", "trainer", "protos"}]
    assert sources
    for file in sources:
        assert in_build_context(file, rules), f".dockerignore drops {file}, which the image needs"


def test_sources_come_after_the_dependencies_and_install_without_them():
    steps = instructions()
    copies = [i for i, (k, a) in enumerate(steps) if k == "COPY" and a.split()[0] == "."]
    assert len(copies) == 1 and steps[copies[0]][1].split()[-1].rstrip("/") == "/opt/saintpipe"
    (requirements,) = [i for i, (k, a) in enumerate(steps) if k == "RUN" and "pip install -r" in a]
    assert requirements < copies[0], "a code change must not reinstall the dependencies"
    (install,) = [i for i, (k, a) in enumerate(steps) if k == "RUN" and "/opt/saintpipe" in a and "pip install" in a]
    assert install > copies[0] and re.search(r"pip install --no-deps (--no-build-isolation )?/opt/saintpipe",
                                             steps[install][1])
    assert "saintpipe --version" in steps[install][1]
    # A source change reruns only the steps after `COPY .`: none of them may install a dependency.
    assert all("pip install -r" not in a and "torch" not in a for k, a in steps[copies[0]:] if k == "RUN")


def final_stage() -> list[tuple[str, str]]:
    """The instructions of the Dockerfile's last stage (from its last FROM)."""
    steps = instructions()
    last_from = max(i for i, (k, _) in enumerate(steps) if k == "FROM")
    return steps[last_from:]


def test_the_image_takes_the_environment_from_its_own_stage_and_installs_nothing_else():
    steps = instructions()
    froms = [a for k, a in steps if k == "FROM"]
    assert len(froms) == 2 and froms[0] == "${BASE_IMAGE} AS dependencies" and froms[1] == "${BASE_IMAGE}", froms
    final = final_stage()
    assert ("COPY", "--from=dependencies /opt/venv /opt/venv") in final
    runs = [a for k, a in final if k == "RUN"]
    assert not [a for a in runs if "pip install -r" in a or "torch" in a or "apt-get" in a], (
        "the image's own stage installs only saintpipe: dependencies come built from the first stage")
    # What the first stage prunes goes in the same RUN as the install, so no layer ever holds it.
    (install,) = [a for k, a in steps if k == "RUN" and "pip install -r" in a]
    assert "rm -rf torch/include" in install


def test_builds_offline_and_with_the_classic_builder():
    text = DOCKERFILE.read_text()
    assert not re.search(r"(?im)^#\s*syntax\s*=", text), "a `# syntax=` line pulls a frontend image"
    assert not re.search(r"(?im)^#\s*(check|escape)\s*=", text)
    steps = instructions()
    buildkit_only = {"--mount", "--network", "--security", "--link", "--chmod", "--parents", "--exclude",
                     "--checksum", "--keep-git-dir"}
    for keyword, args in steps:
        if keyword in ("RUN", "COPY", "ADD"):
            words = args.split()
            flags = {w.split("=")[0] for w in words[:next(i for i, w in enumerate(words) if not w.startswith("--"))]}
            assert not flags & buildkit_only, f"{keyword} {args}: BuildKit only"
            assert "<<" not in args, f"{keyword} with a heredoc: BuildKit only"
    # The wheelhouse settings: declared after FROM (so each RUN sees them), before the first pip install.
    keywords = [k for k, _ in steps]
    from_at = keywords.index("FROM")
    arg_at = {a.split("=")[0]: i for i, (k, a) in enumerate(steps) if k == "ARG"}
    first_pip = min(i for i, (k, a) in enumerate(steps) if k == "RUN" and "pip install" in a)
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS"):
        assert name in arg_at and from_at < arg_at[name] < first_pip, name
        assert f"ARG {name}=" not in text, f"{name} has no default: an ordinary build uses the index"


def test_dockerignore_keeps_the_context_small():
    rules = dockerignore_rules()
    for path in (".git/HEAD", ".venv/bin/python", "tests/data/cora.npz", "helm/saintpipe/Chart.yaml",
                 "docs/how-to/monitoring.md", "services/__pycache__/x.cpython-311.pyc", ".env"):
        assert not in_build_context(path, rules), path
    assert in_build_context("saintpipe/cli/health_probe.py", rules)
    included = [f for f in tracked_files() if in_build_context(f, rules)]
    assert included and all(f.split("/")[0] in {"saintpipe", "services", "trainer", "protos", "pyproject.toml",
                                                  "README.md", "constraints.txt"} for f in included)


def test_default_torch_is_the_projects_cpu_pin():
    text = DOCKERFILE.read_text()
    pins = (ROOT / "constraints.txt").read_text().splitlines()  # the exact versions (pyproject.toml: ranges)
    (torch_pin,) = [p for p in pins if p.startswith("torch==")]
    assert f"ARG TORCH_VERSION={torch_pin.split('==')[1]}" in text
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in text
    assert "ARG BASE_IMAGE=python:3.11-slim" in text and "FROM ${BASE_IMAGE}" in text


def test_image_runs_any_service_as_an_unprivileged_user():
    steps = instructions()
    keywords = [k for k, _ in steps]
    assert "ENTRYPOINT" not in keywords, "each service picks its own command"
    assert "CMD" in keywords
    users = [a for k, a in steps if k == "USER"]
    assert users and users[-1] == "saintpipe" and steps[-1] == ("USER", "saintpipe"), (
        "the last step switches to the unprivileged user (every RUN before it installs as root)")
    first_run = next(a for k, a in final_stage() if k == "RUN")
    assert "useradd --create-home --uid 10001 saintpipe" in first_run
    assert "mkdir -p /data /runs" in first_run and "chown saintpipe:saintpipe /data /runs" in first_run


def test_image_mount_points_exist_and_no_anonymous_volumes():
    # A VOLUME instruction would give every container anonymous volumes that outlive it; the mount points
    # themselves must exist in the image, owned by the saintpipe user (a missing one is created root-owned).
    assert not [a for k, a in instructions() if k == "VOLUME"]
    runs = [a for k, a in instructions() if k == "RUN"]
    made = set()
    for run in runs:
        for dirs, owned in re.findall(r"mkdir -p ([/\w ]+?) && chown saintpipe:saintpipe ([/\w ]+?)(?: \\|$| &&)", run):
            assert dirs.split() == owned.split(), "each mount point made is given to the saintpipe user"
            made |= set(dirs.split())
    assert {"/data", "/runs", "/certs"} <= made
    compose = load_compose(ROOT / "docker-compose.yml", read_env_file(ROOT / ".env.example"))
    mounts = [parse_volume(v) for s in compose["services"].values()
              if s.get("image", "").startswith("saintpipe") for v in s.get("volumes", [])]
    # A read-only bind of one of the repository's files (the sweep profile's sweep file) is only read: the
    # engine's root-owned mount point is enough, the file keeps its own mode.
    files = [m for m in mounts if m.read_only and m.source.startswith("./") and (ROOT / m.source).is_file()]
    assert all((ROOT / m.source).stat().st_mode & 0o004 for m in files), "a bound file the saintpipe user can read"
    targets = {m.target for m in mounts if m not in files}
    assert targets == made, "a mount point the image lacks is created root-owned: the saintpipe user cannot write"
