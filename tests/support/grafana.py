"""Grafana dashboard JSON checked against Grafana's own schema, as Grafana's Foundation SDK types it.

The SDK (grafana-foundation-sdk) is generated from Grafana's schemas: the
dashboard kind and every core panel plugin's and datasource's options. Its
``from_json`` decoders keep only the fields the schema knows and copy values as
they come, so ``dashboard_schema_problems`` checks three things:

1. the JSON decodes (``Dashboard.from_json``, with the core plugins registered,
   so each panel's options and ``fieldConfig.defaults.custom`` decode into the
   panel plugin's types and each query into its datasource's type);
2. every decoded value has the type the SDK declares for its field (a string
   where an int belongs, a value outside an enum, a list where an object
   belongs: the SDK's decoder would carry these through unnoticed);
3. re-encoding the decoded model gives back every field of the input with the
   same value: a field the schema does not know is dropped by the decoder and
   so reported. Fields the SDK adds (its defaults) are allowed.

Plus: every panel's type is a panel plugin the SDK knows, and every query a
datasource the SDK has types for (an unknown one would pass unchecked).
"""

from __future__ import annotations

import enum
import importlib.util
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dashboard_model

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "deploy" / "grafana" / "dashboard.py"
DASHBOARD_FILES = (
    ROOT / "deploy" / "grafana" / "dashboards" / "saintpipe.json",
    ROOT / "helm" / "saintpipe" / "dashboards" / "saintpipe.json",
)
SDK_PACKAGE = "grafana_foundation_sdk."


def load_generator() -> types.ModuleType:
    """deploy/grafana/dashboard.py as a module (it is a script, not part of the saintpipe package)."""
    name = "saintpipe_grafana_dashboard"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, GENERATOR)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class DashboardSchemaError(AssertionError):
    """The dashboard does not fit Grafana's schema; ``problems`` lists where and why."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("dashboard does not fit Grafana's schema:\n  " + "\n  ".join(problems))
        self.problems = problems


def validate_dashboard(data: Any) -> dashboard_model.Dashboard:
    """The decoded dashboard, or DashboardSchemaError naming every problem."""
    problems = dashboard_schema_problems(data)
    if problems:
        raise DashboardSchemaError(problems)
    return dashboard_model.Dashboard.from_json(data)


def dashboard_schema_problems(data: Any) -> list[str]:
    """Every way ``data`` (dashboard JSON, parsed) departs from Grafana's schema; empty: none."""
    plugins.register_default_plugins()
    if not isinstance(data, dict):
        return [f"dashboard: a JSON object is expected, not {type(data).__name__}"]
    try:
        parsed = dashboard_model.Dashboard.from_json(data)
        encoded = _encode(parsed)
    except Exception as exc:  # noqa: BLE001 - any failure of the SDK's decoder is the finding
        return [f"dashboard: the SDK cannot decode it: {type(exc).__name__}: {exc}"]
    problems: list[str] = []
    _check_model(parsed, "dashboard", problems)
    _check_plugins(parsed, problems)
    _compare(data, encoded, "dashboard", problems)
    return problems


def _encode(obj: Any) -> Any:
    return json.loads(json.dumps(obj, cls=JSONEncoder))


def _is_model(obj: Any) -> bool:
    return type(obj).__module__.startswith(SDK_PACKAGE) and callable(getattr(obj, "to_json", None))


def _label(value: Any) -> str:
    text = json.dumps(value, cls=JSONEncoder) if not isinstance(value, enum.Enum) else repr(value.value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is not None or not isinstance(tp, type):
        return str(tp).replace("typing.", "")
    return tp.__name__


def _check_model(obj: Any, path: str, problems: list[str]) -> None:
    """Each field of an SDK model object against the type the SDK declares for it."""
    for field, tp in typing.get_type_hints(type(obj)).items():
        _check(getattr(obj, field, None), tp, f"{path}.{field}", problems)


def _check(value: Any, tp: Any, path: str, problems: list[str]) -> None:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is typing.Any or tp is object:
        if _is_model(value):
            _check_model(value, path, problems)
        return
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return
        members = [a for a in args if a is not type(None)]
        attempts = []
        for member in members:
            found: list[str] = []
            _check(value, member, path, found)
            if not found:
                return
            attempts.append(found)
        # The member the value is an instance of (a Panel among Panel | RowPanel) tells what is wrong inside.
        instance_of = [i for i, m in enumerate(members) if isinstance(m, type) and isinstance(value, m)]
        if len(members) == 1 or len(instance_of) == 1:
            problems.extend(attempts[instance_of[0] if len(instance_of) == 1 else 0])
        else:
            problems.append(f"{path}: {_label(value)} is none of {', '.join(_type_name(m) for m in members)}")
        return
    if origin is typing.Literal:
        if not any(type(value) is type(a) and value == a for a in args):
            problems.append(f"{path}: {_label(value)} is not one of {list(args)}")
        return
    if origin is list:
        if not isinstance(value, list):
            problems.append(f"{path}: a list is expected, not {_label(value)}")
            return
        for i, item in enumerate(value):
            title = getattr(item, "title", None)
            label = f" ({title!r})" if isinstance(title, str) else ""
            _check(item, args[0], f"{path}[{i}]{label}", problems)
        return
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"{path}: an object is expected, not {_label(value)}")
            return
        for key, item in value.items():
            _check(key, args[0], f"{path} key {key!r}", problems)
            _check(item, args[1], f"{path}.{key}", problems)
        return
    if not isinstance(tp, type):
        problems.append(f"{path}: cannot check against {tp!r}")  # a typing form this checker does not know
        return
    if issubclass(tp, enum.Enum):
        base = int if issubclass(tp, int) else str
        if isinstance(value, bool) or not isinstance(value, base) or value not in {m.value for m in tp}:
            problems.append(f"{path}: {_label(value)} is not one of {[m.value for m in tp]}")
        return
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    elif tp is cogvariants.Dataquery:
        ok = isinstance(value, tp)
        if ok and not isinstance(value, cogruntime.UnknownDataquery):
            _check_model(value, path, problems)
    elif tp.__module__.startswith(SDK_PACKAGE) and hasattr(tp, "from_json"):
        if isinstance(value, tp):
            _check_model(value, path, problems)
            return
        if isinstance(value, dict):
            # A few fields (Panel.links, Panel.transformations) the SDK's decoder
            # keeps as raw JSON: decode them with their declared type here.
            try:
                decoded = tp.from_json(value)
                encoded = _encode(decoded)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{path}: not a {tp.__name__}: {type(exc).__name__}: {exc}")
                return
            _check_model(decoded, path, problems)
            _compare(value, encoded, path, problems)
            return
        ok = False
    else:
        ok = isinstance(value, tp)
    if not ok:
        problems.append(f"{path}: {_type_name(tp)} expected, not {_label(value)}")


def _panels(parsed: dashboard_model.Dashboard) -> typing.Iterator[tuple[str, Any]]:
    for i, panel in enumerate(parsed.panels or []):
        yield f"dashboard.panels[{i}] ({panel.title!r})", panel
        if isinstance(panel, dashboard_model.RowPanel):
            for j, inner in enumerate(panel.panels or []):
                yield f"dashboard.panels[{i}].panels[{j}] ({inner.title!r})", inner


def _check_plugins(parsed: dashboard_model.Dashboard, problems: list[str]) -> None:
    """Panel types and query types the SDK has schemas for, so nothing passes unchecked."""
    for path, panel in _panels(parsed):
        if isinstance(panel, dashboard_model.RowPanel):
            continue
        config = cogruntime.panelcfg_config(panel.type_val) if isinstance(panel.type_val, str) else None
        if config is None:
            problems.append(f"{path}: panel type {panel.type_val!r} is not a panel plugin "
                            "Grafana's schema has")
            continue
        if config.options_from_json_hook is not None and panel.options is not None:
            options_type = config.options_from_json_hook.__self__
            if not isinstance(panel.options, options_type):
                problems.append(f"{path}.options: not {panel.type_val}'s {options_type.__name__}")
        field_config = panel.field_config
        custom = None
        if isinstance(field_config, dashboard_model.FieldConfigSource):
            custom = field_config.defaults.custom
        if config.field_config_from_json_hook is not None and custom is not None and not _is_model(custom):
            problems.append(f"{path}.fieldConfig.defaults.custom: not {panel.type_val}'s field config")
        for j, target in enumerate(panel.targets or []):
            if isinstance(target, cogruntime.UnknownDataquery):
                problems.append(f"{path}.targets[{j}]: the query's datasource type is not one "
                                "Grafana's schema has types for, so it cannot be checked")


def _compare(given: Any, encoded: Any, path: str, problems: list[str]) -> None:
    """Every field of ``given`` must come back from the SDK with the same value."""
    if isinstance(given, dict):
        if not isinstance(encoded, dict):
            problems.append(f"{path}: {_label(given)} came back as {_label(encoded)}")
            return
        for key, value in given.items():
            if key not in encoded:
                problems.append(f"{path}.{key}: not a field of Grafana's schema (the SDK drops it)")
            else:
                _compare(value, encoded[key], f"{path}.{key}", problems)
    elif isinstance(given, list):
        if not isinstance(encoded, list) or len(given) != len(encoded):
            problems.append(f"{path}: {_label(given)} came back as {_label(encoded)}")
            return
        for i, (a, b) in enumerate(zip(given, encoded)):
            _compare(a, b, f"{path}[{i}]", problems)
    elif type(given) is not type(encoded) or given != encoded:
        problems.append(f"{path}: {_label(given)} came back as {_label(encoded)}")
