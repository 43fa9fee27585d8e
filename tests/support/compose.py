"""Read docker-compose.yml the way Docker Compose does, for tests without a Docker engine.

Compose interpolates ``${VAR}``-style references in every string value from
the shell environment and the project's ``.env`` file before it does anything
else; ``$$`` stands for a literal ``$`` that reaches the container. This module
implements that interpolation (the Compose Specification's rules) plus the
lookups the deployment tests need: a service's command, its environment
(``env_file`` then ``environment``) and its health check.

    >>> interpolate("redis://:${PW}@redis:6379/${DB:-0} $$HOME", {"PW": "s"})
    'redis://:s@redis:6379/0 $HOME'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml

# ${NAME}, ${NAME:-x}, ${NAME-x}, ${NAME:?x}, ${NAME?x}, ${NAME:+x}, ${NAME+x}, $NAME, $$
_REF = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


class InterpolationError(ValueError):
    """A required variable (``${VAR:?message}``) is missing, or a reference is malformed."""


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Substitute Compose variable references in one string."""

    def replace(match: re.Match) -> str:
        if match.group("escaped"):
            return "$"
        name = match.group("braced") or match.group("named")
        op, arg = match.group("op"), match.group("arg") or ""
        present = name in env
        nonempty = bool(env.get(name))
        if op in (":-", "-"):
            use_default = not nonempty if op == ":-" else not present
            return interpolate(arg, env) if use_default else env[name]
        if op in (":?", "?"):
            missing = not nonempty if op == ":?" else not present
            if missing:
                raise InterpolationError(f"required variable {name} is missing: {arg}")
            return env[name]
        if op in (":+", "+"):
            use_alt = nonempty if op == ":+" else present
            return interpolate(arg, env) if use_alt else ""
        return env.get(name, "")

    if "${" in _REF.sub("", value):
        raise InterpolationError(f"malformed variable reference in {value!r}")
    return _REF.sub(replace, value)


def interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    """Interpolate every string value (not keys) of a parsed YAML tree."""
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_tree(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate_tree(item, env) for key, item in node.items()}
    return node


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a Compose env file: ``KEY=VALUE`` lines, ``#`` comments, optional quotes."""
    env: dict[str, str] = {}
    for number, raw in enumerate(Path(path).read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", key.strip()):
            raise ValueError(f"{path}:{number}: expected KEY=VALUE, got {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def load_raw(path: Path) -> dict[str, Any]:
    """The compose file as YAML (anchors and merge keys resolved), not interpolated."""
    return yaml.safe_load(Path(path).read_text())


def load_compose(path: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The compose file with every variable reference substituted from ``env``."""
    return interpolate_tree(load_raw(path), env)


def as_list(value: Any) -> list[str]:
    """A command, entrypoint or health-check test as an argv list (string forms are split on spaces)."""
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    return [str(item) for item in value]


def service_environment(service: Mapping[str, Any], project_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """What a container's environment gets from the file: ``env_file`` entries, then ``environment``."""
    result: dict[str, str] = {}
    env_files = service.get("env_file") or []
    for entry in [env_files] if isinstance(env_files, str) else env_files:
        file = entry if isinstance(entry, str) else entry["path"]
        result.update(read_env_file(project_dir / file))
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) if "=" in item else (item, env.get(item, "")) for item in environment)
    result.update({key: "" if value is None else str(value) for key, value in environment.items()})
    return result


class Mount(NamedTuple):
    """One entry of a service's ``volumes`` (short syntax): a named volume or host path at ``target``."""

    source: str
    target: str
    read_only: bool


def parse_volume(spec: str | Mapping[str, Any]) -> Mount:
    """``SOURCE:TARGET[:MODE]`` (MODE a comma-separated list such as ``ro`` or ``ro,z``) or the long syntax.

    >>> parse_volume("saintpipe-data:/data:ro")
    Mount(source='saintpipe-data', target='/data', read_only=True)
    """
    if isinstance(spec, Mapping):
        return Mount(str(spec.get("source", "")), str(spec["target"]), bool(spec.get("read_only", False)))
    parts = spec.split(":")
    if len(parts) == 1:  # an anonymous volume
        return Mount("", parts[0], False)
    if len(parts) > 3:
        raise ValueError(f"volume {spec!r}: expected SOURCE:TARGET[:MODE]")
    modes = parts[2].split(",") if len(parts) == 3 else []
    unknown = set(modes) - {"ro", "rw", "z", "Z", "cached", "delegated", "consistent", "nocopy"}
    if unknown or ("ro" in modes and "rw" in modes):
        raise ValueError(f"volume {spec!r}: bad mode {parts[2]!r}")
    return Mount(parts[0], parts[1], "ro" in modes)


def healthcheck_argv(service: Mapping[str, Any]) -> list[str]:
    """A health check's command as argv: ``["CMD", ...]`` as is, ``CMD-SHELL`` as ``sh -c``."""
    test = as_list((service.get("healthcheck") or {}).get("test"))
    if not test:
        return []
    if test[0] == "CMD":
        return test[1:]
    if test[0] == "CMD-SHELL":
        return ["sh", "-c", " ".join(test[1:])]
    return ["sh", "-c", " ".join(test)]
