"""Typed configuration: one pydantic model per service, read from a file.

Precedence, lowest to highest: the model's defaults, the config file (TOML,
YAML or JSON), environment variables, then command-line flags. Environment
variables are named ``SAINTPIPE_<SECTION>__<FIELD>`` (double underscore between
levels), e.g. ``SAINTPIPE_POOL__CAPACITY=64``. A bad value raises
:class:`~saintpipe.core.errors.ConfigError` naming the file (or variable) and field.

A ``null`` in a file (YAML ``~``/``null``, JSON ``null``) or a variable set to ``null`` is a value: it sets a
field that may be None to None (``clip_multiple: null`` turns clipping off), and is refused, naming the key,
where the field may not be None. To get a field's default, leave its key out. A flag that is not given
(``None`` in ``flags``) sets nothing.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

import pydantic
import yaml

from saintpipe.core.errors import ConfigError
from saintpipe.core.files import TooLarge, read_capped
from saintpipe.core.model_fields import fields_at

ENV_PREFIX = "SAINTPIPE_"

M = TypeVar("M", bound=pydantic.BaseModel)


class StrictModel(pydantic.BaseModel):
    """Base for every config section: unknown keys are errors, values are validated on assignment."""

    # NaN passes every gt/le bound (each comparison is False) and inf passes every lower one: refuse both.
    model_config = pydantic.ConfigDict(extra="forbid", validate_assignment=True, frozen=False, allow_inf_nan=False)


# A config file is read whole before parsing: past this size it is not one (--config /dev/zero, a data file).
MAX_CONFIG_BYTES = 16 * 2**20
# Values after expanding YAML aliases: an alias bomb (nested anchors) is small on disk, huge to validate.
MAX_CONFIG_VALUES = 1_000_000
FORMATS = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML, YAML or JSON config file into a plain dict.

    Raises:
        ConfigError: one line naming the file and what is wrong: missing, a directory, unreadable, too large,
            not UTF-8 (with the byte offset and line), not valid TOML/YAML/JSON (with the line), or not a
            mapping at the top.
    """
    path = Path(path)
    try:
        is_dir = stat.S_ISDIR(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror or exc}") from None
    if is_dir:
        raise ConfigError(f"{path}: is a directory, not a config file")
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ConfigError(f"{path}: unknown config format {path.suffix!r} (use .toml, .yaml or .json)")
    data = _parse(path, fmt, _read_text(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a table/mapping, got {type(data).__name__}")
    _check_expanded_size(path, data)
    return data


def _read_text(path: Path) -> str:
    try:
        raw = read_capped(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror or exc}") from None
    except TooLarge:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB, not a config file") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} (line {line}) "
                          "cannot be decoded; save the file as UTF-8") from None
    return text.removeprefix("\ufeff")  # a byte-order mark, as some editors write, is not content


def _parse(path: Path, fmt: str, text: str) -> Any:
    try:
        if fmt == "TOML":
            return tomllib.loads(text)
        if fmt == "YAML":
            return yaml.safe_load(text) or {}
        return json.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {_one_line(exc)}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {exc.problem or exc.context or 'cannot parse'}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a config file: values nested too deeply to parse") from None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _check_expanded_size(path: Path, data: Any) -> None:
    # Walks the structure as validation will, shared YAML aliases once per use; stops at the budget.
    budget = MAX_CONFIG_VALUES
    stack = [data]
    while stack:
        node = stack.pop()
        budget -= 1
        if budget < 0:
            raise ConfigError(f"{path}: more than {MAX_CONFIG_VALUES:,} values (YAML aliases expanded), "
                              "not a config file")
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def env_overrides(environ: Mapping[str, str] | None = None, prefix: str = ENV_PREFIX) -> dict[str, Any]:
    """Collect ``SAINTPIPE_A__B=value`` variables into ``{"a": {"b": value}}``.

    Values are parsed as JSON when they parse (numbers, booleans, lists) and
    kept as strings otherwise; pydantic does the final validation.
    """
    out: dict[str, Any] = {}
    for key, parts, value in _env_items(environ, prefix):
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment variable {key}: conflicts with another variable")
        node[parts[-1]] = value
    return out


def _env_items(environ: Mapping[str, str] | None, prefix: str) -> list[tuple[str, tuple[str, ...], Any]]:
    """``(variable, lower-cased path, value)`` of each ``SAINTPIPE_A__B`` variable."""
    environ = os.environ if environ is None else environ
    items = []
    for key, raw in environ.items():
        if not key.startswith(prefix) or "__" not in key[len(prefix):]:
            continue
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        items.append((key, tuple(p.lower() for p in key[len(prefix):].split("__")), value))
    return items


def deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``top`` into a copy of ``base``; nested mappings merge, other values replace.

    A ``None`` in ``top`` replaces too (a config file's ``null``): validation then takes it as the field's
    None or refuses it. Drop unset values first (:func:`given`) where ``None`` means "not given".
    """
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class _Null:
    """The type of :data:`NULL`."""

    def __repr__(self) -> str:
        return "NULL"


# In ``flags``, where None means "not given": a value that is None, as a file's null (``--param clip_multiple=null``).
NULL = _Null()


def given(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` without its ``None`` entries, at every level: the settings a caller gave (flags not given
    are None), as opposed to a file's ``null``, which is a value; :data:`NULL` becomes that value (None)."""
    return {k: given(v) if isinstance(v, Mapping) else None if v is NULL else v
            for k, v in values.items() if v is not None}


def load_config(
    model: type[M],
    path: Path | str | None = None,
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    section: str | None = None,
    base: tuple[str, Mapping[str, Any]] | None = None,
) -> M:
    """Build ``model`` from defaults < file < environment < flags.

    Args:
        model: the pydantic model class to build.
        path: optional config file (TOML, YAML or JSON).
        flags: values given on the command line (``None`` values, at any level, are not given: ignored).
        environ: the environment (defaults to ``os.environ``).
        section: read only this top-level section of the file and environment
            (e.g. ``"pool"`` when a service reads its own part of a shared file).
        base: ``(where, values)`` under the file: a stored configuration (a resumed run's), named ``where``
            in error messages.

    Raises:
        ConfigError: naming the file or variable and the field at fault.
    """
    # Each layer: where its values come from, as a function of a value's path (for the error message).
    layers: list[tuple[Callable[[tuple[str, ...]], str], dict[str, Any]]] = []
    if base is not None:
        layers.append((lambda keys: f"from {base[0]}", dict(base[1])))
    if path is not None:
        data = read_config_file(Path(path))
        part = data.get(section, {}) if section else data
        if not isinstance(part, dict):
            raise ConfigError(f"{path}: section [{section}] must be a table/mapping, got {type(part).__name__}")
        layers.append((lambda keys: f"from {path}", part))
    env = env_overrides(environ)
    scope: tuple[str, ...] = (section,) if section else ()
    if section:
        env = env.get(section, {})
    if env:
        layers.append((_env_source(environ, scope), env))
    if flags:
        layers.append((lambda keys: "from command-line flags", given(flags)))
    merged: dict[str, Any] = {}
    for _, layer in layers:
        merged = deep_merge(merged, layer)
    try:
        return model.model_validate(merged)
    except pydantic.ValidationError as exc:
        # dict.fromkeys: one line per problem (a null refused by each member of a union is one problem)
        problems = "; ".join(dict.fromkeys(_problem(err, layers, scope, model) for err in exc.errors()))
        raise ConfigError(f"invalid configuration: {problems}") from None


def _env_source(environ: Mapping[str, str] | None, scope: tuple[str, ...]) -> Callable[[tuple[str, ...]], str]:
    """Names the variable that set the field at ``keys`` (or a list holding it), or those under it."""
    names = {parts: key for key, parts, _ in _env_items(environ, ENV_PREFIX)}

    def describe(keys: tuple[str, ...]) -> str:
        path = scope + keys
        found = sorted(key for parts, key in names.items()
                       if parts[:len(path)] == path or path[:len(parts)] == parts)
        if not found:
            return f"from environment variables {ENV_PREFIX}*"
        return f"from environment variable{'s' if len(found) > 1 else ''} {', '.join(found)}"

    return describe


def _problem(err: Any, layers: list[Any], scope: tuple[str, ...], model: type[pydantic.BaseModel]) -> str:
    """One validation error as ``field: what is wrong, got VALUE (where it came from)``."""
    value = err.get("input")
    if value is None and err["type"] != "missing":  # a file's null (or a variable's) where None is not allowed
        err = {**err, "loc": _null_loc(err["loc"], layers)}
    loc = tuple(str(p) for p in err["loc"])
    field = ".".join(scope + loc) or "<root>"
    msg = err["msg"]
    if err["type"] == "extra_forbidden" and (known := fields_at(model, loc[:-1])):
        msg = f"not a known key here (known: {', '.join(known)})"  # a typo needs the names that exist
    got = ""
    if value is None and err["type"] != "missing":
        msg = "null is not allowed here; remove the key for the default"
    elif err["type"] != "missing" and isinstance(value, (str, int, float, bool)):
        shown = repr(value)
        got = f", got {shown if len(shown) <= 60 else shown[:57] + '...'}"
    # The value came from the highest layer that sets this field; a default or a check across fields
    # (found in none) is reported against every layer given.
    sources = [describe(keys) for describe, data in layers if (keys := _lookup(data, loc)) is not None]
    where = sources[-1] if sources else "; ".join(describe(()) for describe, _ in layers) or "defaults"
    return f"{field}: {msg}{got} ({where})"


def _null_loc(loc: tuple[Any, ...], layers: list[Any]) -> tuple[Any, ...]:
    """``loc`` cut to the key that holds the null: pydantic reports a union's refusal at its members
    (``x.int``, ``x.str``), which are not keys."""
    for end in range(len(loc), 0, -1):
        keys = tuple(str(p) for p in loc[:end])
        for _, data in layers:
            found = _lookup(data, keys)
            if found is not None and _at(data, found) is None:
                return tuple(loc[:end])
    return loc


def _at(data: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


def _lookup(data: Any, loc: tuple[str, ...]) -> tuple[str, ...] | None:
    """The keys of ``data`` along ``loc`` when ``data`` sets that field, else None.

    pydantic's locations hold steps that are not keys (a union's tag, e.g.
    ``sampler.random_walk.roots``); those are skipped when the next step is a key.
    """
    keys: list[str] = []
    node = data
    for i, step in enumerate(loc):
        if isinstance(node, dict) and step in node:
            keys.append(step)
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            keys.append(step)
            node = node[int(step)]
        elif isinstance(node, dict) and i + 1 < len(loc) and loc[i + 1] in node:
            continue
        else:
            return None
    return tuple(keys)
