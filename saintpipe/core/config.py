"""Typed configuration: one pydantic model per service, read from a file.

Precedence, lowest to highest: the model's defaults, the config file (TOML,
YAML or JSON), environment variables, then command-line flags. Environment
variables are named ``SAINTPIPE_<SECTION>__<FIELD>`` (double underscore between
levels), e.g. ``SAINTPIPE_POOL__CAPACITY=64``. A bad value raises
:class:`~saintpipe.core.errors.ConfigError` naming the file (or variable) and field.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Mapping, TypeVar

import pydantic
import yaml

from saintpipe.core.errors import ConfigError

ENV_PREFIX = "SAINTPIPE_"

M = TypeVar("M", bound=pydantic.BaseModel)


class StrictModel(pydantic.BaseModel):
    """Base for every config section: unknown keys are errors, values are validated on assignment."""

    model_config = pydantic.ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML, YAML or JSON config file into a plain dict."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        elif path.suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"{path}: unknown config format {path.suffix!r} (use .toml, .yaml or .json)")
    except (tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot parse: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a table/mapping, got {type(data).__name__}")
    return data


def env_overrides(environ: Mapping[str, str] | None = None, prefix: str = ENV_PREFIX) -> dict[str, Any]:
    """Collect ``SAINTPIPE_A__B=value`` variables into ``{"a": {"b": value}}``.

    Values are parsed as JSON when they parse (numbers, booleans, lists) and
    kept as strings otherwise; pydantic does the final validation.
    """
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(prefix) or "__" not in key[len(prefix):]:
            continue
        parts = [p.lower() for p in key[len(prefix):].split("__")]
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment variable {key}: conflicts with another variable")
        node[parts[-1]] = value
    return out


def deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``top`` into a copy of ``base``; nested mappings merge, other values replace."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        elif value is not None:
            merged[key] = value
    return merged


def load_config(
    model: type[M],
    path: Path | str | None = None,
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    section: str | None = None,
) -> M:
    """Build ``model`` from defaults < file < environment < flags.

    Args:
        model: the pydantic model class to build.
        path: optional config file (TOML, YAML or JSON).
        flags: values given on the command line (``None`` values are ignored).
        environ: the environment (defaults to ``os.environ``).
        section: read only this top-level section of the file and environment
            (e.g. ``"pool"`` when a service reads its own part of a shared file).

    Raises:
        ConfigError: naming the file or variable and the field at fault.
    """
    layers: list[tuple[str, dict[str, Any]]] = []
    if path is not None:
        data = read_config_file(Path(path))
        layers.append((str(path), data.get(section, {}) if section else data))
    env = env_overrides(environ)
    if section:
        env = env.get(section, {})
    if env:
        layers.append(("environment (SAINTPIPE_*)", env))
    if flags:
        layers.append(("command-line flags", {k: v for k, v in flags.items() if v is not None}))
    merged: dict[str, Any] = {}
    for _, layer in layers:
        merged = deep_merge(merged, layer)
    try:
        return model.model_validate(merged)
    except pydantic.ValidationError as exc:
        where = ", ".join(name for name, _ in layers) or "defaults"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration (from {where}): {problems}") from None
