"""The reference pages, generated from the code at build time: an MkDocs hook (mkdocs.yml's ``hooks``).

Each page is a pure function of what it documents and returns Markdown:

* :func:`cli_page`: every ``saintpipe`` command, walked from the real argparse parser;
* :func:`config_page`: every section and field of the config models, with its environment variable and the
  flags that set it;
* :func:`metrics_page`: every Prometheus metric, read from the metric objects and collectors themselves;
* :func:`alerts_page`: the alert rules of ``deploy/prometheus/alerts.yml``.

:func:`pages` gathers the real inputs and :func:`on_files` adds the pages to the build, so a flag, a field, a
metric or a rule added to the code is on the site at the next build, and a page cannot drift from it.
:func:`on_config` points mkdocstrings (the Python API pages) at the import namespace's layout.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import html
import inspect
import json
import re
import shutil
import tempfile
import textwrap
import types
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, Union, get_args, get_origin

from griffe import Extension
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
NOTE = "Generated from the code at build time (`docs/hooks/reference.py`): it cannot drift from it."


def _text(value: Any) -> str:
    """Prose for Markdown (a table cell, a paragraph): one line; Sphinx roles (:class:`~a.B`) as code; the
    characters Markdown would take for markup escaped, outside code spans."""
    text = _roles(" ".join(str(value).split()))
    out, last = [], 0
    for span in re.finditer(r"(`+)(.+?)\1", text):
        out += [_escape(text[last:span.start()]), span.group(0)]
        last = span.end()
    return "".join([*out, _escape(text[last:])])


def _roles(text: str) -> str:
    """Sphinx's cross-reference roles as code: :class:`~a.b.C` is `C`, :mod:`a.b` is `a.b`."""
    return re.sub(r":[a-z]+:`(~?)([^`]+)`", lambda m: f"`{m[2].split('.')[-1] if m[1] else m[2]}`", text)


class PlainDocstrings(Extension):
    """A griffe extension (mkdocs.yml, mkdocstrings' options): the code's docstrings, written for Sphinx in
    places, as Markdown: roles as code (:func:`_roles`), a paragraph's closing ``::`` as ``:``."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = re.sub(r"::$", ":", _roles(obj.docstring.value), flags=re.MULTILINE)


def _escape(text: str) -> str:
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", html.escape(text, quote=False))


def _code(value: Any) -> str:
    return f"`` {value} ``" if "`" in str(value) else f"`{value}`"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _slug(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", " ".join(parts).lower()).strip("-")


# --- the command line ------------------------------------------------------------------------------------------

def commands(parser: argparse.ArgumentParser, help_text: str = "", aliases: Sequence[str] = ()) \
        -> Iterator[tuple[argparse.ArgumentParser, str, Sequence[str]]]:
    """``(parser, help, aliases)`` of the command and of every subcommand under it, depth first."""
    yield parser, help_text, aliases
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                sub = action.choices[choice.dest]
                names = [name for name, p in action.choices.items() if p is sub and name != choice.dest]
                yield from commands(sub, choice.help or "", names)


def _value(action: argparse.Action) -> str:
    """What an option takes: a switch, a count, or a value of some type (choices, range)."""
    if action.nargs == 0:
        return "count" if isinstance(action, argparse._CountAction) else "switch"
    if action.choices:
        shown = " \\| ".join(_code(c) for c in action.choices)
    else:
        kind = action.type
        bounds = getattr(kind, "bounds", None)
        if bounds is not None:  # saintpipe.core.argtypes: "an integer from 1 to 9"
            shown = f"{kind.what.split()[-1]} {bounds.describe()}"
        else:
            shown = {None: "text", int: "integer", float: "number", Path: "path"}.get(
                kind, getattr(kind, "__name__", type(kind).__name__))
        if action.metavar:
            shown = f"{_code(action.metavar)}: {shown}"
    many = {"+": "one or more", "*": "any number", "?": "optional"}.get(str(action.nargs))
    if isinstance(action, argparse._AppendAction):
        many = "repeatable"
    return f"{shown} ({many})" if many else shown


def _help(action: argparse.Action, prog: str) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = {**vars(action), "prog": prog}
    if action.choices is not None:
        params["choices"] = ", ".join(map(str, action.choices))
    try:
        return _text(action.help % params)
    except (KeyError, TypeError, ValueError):
        return _text(action.help)


def _default(action: argparse.Action) -> str:
    value = action.default
    if value is None or value == argparse.SUPPRESS or action.nargs == 0 or value == []:
        return ""
    return _code(value)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=100)  # a fixed width: the page, not the terminal
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _signature(action: argparse.Action) -> tuple[tuple[str, ...], str | None]:
    return tuple(action.option_strings), action.help


def cli_page(parser: argparse.ArgumentParser) -> str:
    """The command-line reference as one text: every command, its usage, arguments and options."""
    return "\n".join(cli_pages(parser).values())


def cli_pages(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The command-line reference, one page per command (``reference/cli/<command>.md``, its subcommands on
    it) after an index with the options every command takes (``reference/cli/index.md``)."""
    everywhere = set.intersection(*({_signature(a) for a in sub._actions} for sub, _, _ in commands(parser)))
    tops = [(sub, help_text) for sub, help_text, _ in commands(parser) if sub.prog.count(" ") == 1]
    index = [f"# Command line\n\n{NOTE}\n",
             "Every command takes the options below; `saintpipe COMMAND --help` prints a command's help.\n",
             _table(["option", "takes", "description"],
                    [[", ".join(_code(o) for o in a.option_strings), _value(a), _help(a, parser.prog)]
                     for a in parser._actions if _signature(a) in everywhere]),
             _table(["command", "description"],
                    [[f"[{_code(sub.prog)}]({_page_name(sub)}.md)", _text(help_text)] for sub, help_text in tops])]
    pages = {"reference/cli/index.md": "\n".join(index)}
    for top, help_text in tops:
        out: list[str] = []
        for sub, sub_help, aliases in commands(top, help_text):
            out += _command_section(sub, sub_help, aliases, everywhere, first=sub is top)
        pages[f"reference/cli/{_page_name(top)}.md"] = "\n".join(out)
    return pages


def _page_name(top: argparse.ArgumentParser) -> str:
    return top.prog.split()[-1]


def _command_section(sub: argparse.ArgumentParser, help_text: str, aliases: Sequence[str], everywhere: set,
                     first: bool) -> list[str]:
    """One command's heading, text, usage and tables (a top-level command's heading is its page's title)."""
    level = "#" * min(sub.prog.count(" "), 3)
    out = [f"{level} {sub.prog} {{#{_slug(sub.prog)}}}\n"]
    if first:
        out.append(f"{NOTE}\n")
    if aliases:
        out.append(f"Also: {', '.join(_code(' '.join([*sub.prog.split()[:-1], a])) for a in aliases)}.\n")
    for text in dict.fromkeys(t for t in (help_text, sub.description) if t):
        out.append(_text(text) + "\n")
    out.append(f"```text\n{_usage(sub)}\n```\n")
    positionals, options = [], []
    for action in sub._actions:
        if isinstance(action, argparse._SubParsersAction):
            rows = [[f"[{_code(sub.prog + ' ' + c.dest)}](#{_slug(sub.prog, c.dest)})", _text(c.help or "")]
                    for c in action._choices_actions]
            out.append(_table(["command", "description"], rows))
        elif not action.option_strings:
            positionals.append([_code(action.metavar or action.dest), _value(action), _help(action, sub.prog)])
        elif _signature(action) not in everywhere:
            options.append([", ".join(_code(o) for o in action.option_strings), _value(action),
                            _default(action), _help(action, sub.prog)])
    if positionals:
        out.append(_table(["argument", "takes", "description"], positionals))
    if options:
        out.append(_table(["option", "takes", "default", "description"], options))
    return out


# --- configuration ---------------------------------------------------------------------------------------------

class ConfigRoot(NamedTuple):
    """A config model as a command reads it: from the file's section ``path`` and from ``SAINTPIPE_<PATH>__*``
    (``path`` None: keyword arguments only); ``effective`` is what the command makes of an empty file, where
    its defaults differ from the model's."""

    reader: str
    path: tuple[str, ...] | None
    model: Any
    effective: Any = None


def _optional(annotation: Any) -> Any:
    from saintpipe.core.model_flags import without_none

    return without_none(annotation)


def _members(annotation: Any) -> list[Any]:
    """The config models a field holds: one, the members of a union of models, or none (a value field)."""
    import pydantic

    base = _optional(annotation)
    found = list(get_args(base)) if get_origin(base) in (Union, types.UnionType) else [base]
    models = [m for m in found if isinstance(m, type) and issubclass(m, pydantic.BaseModel)]
    return models if models and len(models) == len(found) else []


def _type(annotation: Any) -> str:
    origin = get_origin(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return " \\| ".join(_code(json.dumps(v)) for v in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(_type(a) for a in get_args(annotation))
    if origin is list:
        return f"list of {_type(get_args(annotation)[0])}"
    if getattr(annotation, "__metadata__", None) is not None:  # Annotated[X, ...]
        return _type(get_args(annotation)[0])
    names = {int: "integer", float: "number", bool: "boolean", str: "string", Path: "path"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(metadata: Sequence[Any], annotation: Any) -> str:
    from saintpipe.core.model_flags import field_bounds

    holder = types.SimpleNamespace(metadata=list(metadata), annotation=annotation)
    notes = []
    if _optional(annotation) in (int, float):
        b = field_bounds(holder)
        low = "" if b.min == float("-inf") else f"{'greater than' if b.min_open else 'at least'} {_number(b.min)}"
        high = "" if b.max == float("inf") else f"{'less than' if b.max_open else 'at most'} {_number(b.max)}"
        if low and high and not b.min_open and not b.max_open:
            notes.append(f"from {_number(b.min)} to {_number(b.max)}")
        else:
            notes += [n for n in (low, high) if n]
    for item in metadata:
        for name, words in (("min_length", "at least {} long"), ("max_length", "at most {} long")):
            if getattr(item, name, None) is not None:
                notes.append(words.format(getattr(item, name)))
        if getattr(item, "pattern", None):
            notes.append(f"matches {_code(item.pattern)}")
    if get_origin(_optional(annotation)) is list:
        item_type = get_args(_optional(annotation))[0]
        inner = [m for extra in getattr(item_type, "__metadata__", ()) for m in getattr(extra, "metadata", [extra])]
        if inner and (each := _bounds(inner, get_args(item_type)[0])):
            notes.append(f"each {each}")
    return ", ".join(notes)


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)  # 86400, not 86400.0
    return str(value) if isinstance(value, int) else f"{value:g}"


def _shown(value: Any) -> str:
    import pydantic

    if isinstance(value, pydantic.BaseModel):
        return _code(json.dumps(value.model_dump(mode="json")))
    return _code(json.dumps(value, default=str))


def _attribute_docs(model: Any) -> dict[str, str]:
    """The docstrings under a model's fields (``x: int = 1`` then ``\"\"\"...\"\"\"``), its bases' included."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
        except (OSError, TypeError, IndexError, AttributeError, SyntaxError):
            continue
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _at(value: Any, path: Sequence[str]) -> Any:
    for key in path:
        value = getattr(value, key, None)
    return value


def _refusal(model: Any, name: str, info: Any) -> str:
    """Why ``model`` refuses ``name`` set at all, even to its default (a field that another part sets), or ''."""
    import pydantic

    if info.is_required():
        return ""
    try:
        model.model_validate({name: info.get_default(call_default_factory=True)})
    except pydantic.ValidationError as exc:
        return "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors() if e["type"] != "missing")
    return ""


def config_page(roots: Sequence[ConfigRoot], flags: Mapping[tuple[Any, str], Sequence[tuple[str, str]]]) -> str:
    """The configuration reference: each reader's sections, each field with its type, default, range,
    description, environment variable and the reader's flag made from it (``flags``: (model, field) ->
    (command, flag) pairs, :func:`model_flag_index`)."""
    from saintpipe.core.config import ENV_PREFIX

    out = [f"# Configuration\n\n{NOTE}\n",
           "Each setting comes from, lowest to highest: the model's default, the config file (`--config FILE`: "
           "TOML, YAML or JSON, one section per heading below), the environment variable "
           f"`{ENV_PREFIX}<SECTION>__<FIELD>` (one `__` between levels; the value is read as JSON when it "
           "parses), then the command's flags. Leave a key out for its default; `null` sets a field that may "
           "be null to null.\n"]
    shown: dict[tuple[tuple[str, ...], Any], str] = {}

    def section(root: ConfigRoot, path: tuple[str, ...], model: Any, title: str, intro: str, tag: str = "") -> None:
        anchor = _slug(root.reader, *path, tag)
        if title:
            out.append(f"{'####' if tag else '###'} {title} {{#{anchor}}}\n")
        own = {name: flag for (m, name), found in flags.items() if m is model
               for command, flag in found if command == root.reader}
        if (path, model) in shown:
            flagged = ", ".join(f"{_code(flag)} ({_code(name)})" for name, flag in own.items())
            out.append(f"As [above](#{shown[path, model]}){'; its flags here: ' + flagged if flagged else ''}.\n")
            return
        shown[path, model] = anchor
        out.extend(_text(t) + "\n" for t in (intro, (model.__dict__.get("__doc__") or "").split("\n\n")[0]) if t)
        out.append(f"Model: {_code(f'{model.__module__}.{model.__qualname__}')}.\n")
        docs = _attribute_docs(model)
        effective = _at(root.effective, path)
        rows, nested = [], []
        for name, info in model.model_fields.items():
            description = _text(info.description or docs.get(name, ""))
            refused = _refusal(model, name, info)
            if refused:
                description = f"**Not set here:** {_text(refused)}"
            members = _members(info.annotation)
            if members and not refused:
                nested.append((name, info, members, description))
                continue
            default = info.get_default(call_default_factory=True)
            shown_default = "" if refused else "required" if info.is_required() else _shown(default)
            if type(effective) is model and getattr(effective, name) != default:
                shown_default += f" ({_text(root.reader)}: {_shown(getattr(effective, name))})"
            base = _optional(info.annotation)
            where = [] if root.path is None or refused else [_code(ENV_PREFIX + "__".join((*path, name)).upper())]
            where += [_code(own[name])] if name in own else []
            rows.append([_code(name), _type(base) + (" or null" if base is not info.annotation else ""),
                         shown_default, "" if refused else _bounds(info.metadata, info.annotation), description,
                         "<br>".join(where)])
        if rows:
            with_where = any(row[-1] for row in rows)
            out.append(_table(["field", "type", "default", "range", "description", "environment / flag"][
                :6 if with_where else 5], [row[:6 if with_where else 5] for row in rows]))
        for name, info, members, description in nested:
            inner, dotted = (*path, name), ".".join((*path, name))
            if len(members) == 1:
                section(root, inner, members[0], _code(f"[{dotted}]"), description)
                continue
            key = info.discriminator if isinstance(info.discriminator, str) else "kind"
            default = info.get_default(call_default_factory=True)
            out.append(f"{_code(f'[{dotted}]')} is one of these, by its {_code(key)} (default "
                       f"{_code(getattr(default, key, default))}): {description}\n")
            for member in members:
                tag = str(member.model_fields[key].default) if key in member.model_fields else member.__name__
                section(root, inner, member, _code(f"[{dotted}] {key} = {tag}"), "", tag)

    for i, root in enumerate(roots):
        if root.reader not in [r.reader for r in roots[:i]]:
            out.append(f"## {root.reader} {{#{_slug(root.reader)}}}\n")
        section(root, root.path or (), root.model, _code(f"[{'.'.join(root.path)}]") if root.path else "", "")
    return "\n".join(out)


def model_flag_index(build: Callable[[], argparse.ArgumentParser]) \
        -> tuple[argparse.ArgumentParser, dict[tuple[Any, str], list[tuple[str, str]]]]:
    """``build()``'s parser, and which flag of which command each config field became
    (:func:`saintpipe.core.model_flags.model_field` names a flag's field)."""
    from saintpipe.core.model_flags import model_field

    parser = build()
    index: dict[tuple[Any, str], list[tuple[str, str]]] = defaultdict(list)
    for sub, _, _ in commands(parser):
        for action in sub._actions:
            hit = model_field(action)
            if hit is not None:
                index[hit].append((sub.prog, action.option_strings[0]))
    return parser, dict(index)


def config_roots() -> list[ConfigRoot]:
    """The config models and where each command reads them."""
    from saintpipe.loader.config import LoaderConfig
    from saintpipe.pipeline.config import PipelineConfig
    from saintpipe.services.feature_shard import config as feature_shard
    from saintpipe.services.pool.config import PoolConfig
    from saintpipe.services.sampler_service import config as sampler_service
    from saintpipe.sweep.config import SweepConfig
    from saintpipe.trainer.config import TrainerConfig

    return [
        ConfigRoot("saintpipe run", (), PipelineConfig, PipelineConfig.model_validate({})),
        # a sweep file is a run's config plus [sweep]: the run's sections are referred to, not repeated
        ConfigRoot("saintpipe sweep", (), SweepConfig, SweepConfig.model_validate({})),
        ConfigRoot("saintpipe serve samplers", (sampler_service.SECTION,), sampler_service.SamplerServiceConfig),
        ConfigRoot("saintpipe serve trainer", ("trainer",), TrainerConfig),
        ConfigRoot("saintpipe serve trainer", ("pool",), PoolConfig),
        ConfigRoot("saintpipe serve feature-shard", (feature_shard.SECTION,), feature_shard.FeatureShardConfig),
        ConfigRoot("saintpipe.loader: SubgraphLoader's keyword arguments", None, LoaderConfig),
    ]


# --- metrics ---------------------------------------------------------------------------------------------------

class MetricDoc(NamedTuple):
    name: str  # as exported: a counter with its _total
    type: str
    labels: tuple[str, ...]
    help: str


def metric_docs(source: Any) -> list[MetricDoc]:
    """The metrics of ``source``: a prometheus_client metric, a collector (collected once), or a module or
    object holding metrics among its attributes (in dicts too)."""
    from prometheus_client.metrics import MetricWrapperBase

    def exported(name: str, kind: str) -> str:
        return name + "_total" if kind == "counter" and not name.endswith("_total") else name

    if isinstance(source, MetricWrapperBase):
        return [MetricDoc(exported(m.name, m.type), m.type, tuple(source._labelnames), m.documentation)
                for m in source.describe()]
    if hasattr(source, "collect") and not isinstance(source, types.ModuleType):
        return [MetricDoc(exported(m.name, m.type), m.type,
                          tuple(dict.fromkeys(k for s in m.samples for k in s.labels if k != "le")), m.documentation)
                for m in source.collect()]
    found: list[MetricDoc] = []
    for value in vars(source).values():
        for item in (value.values() if isinstance(value, dict) else [value]):
            if isinstance(item, MetricWrapperBase):
                found += metric_docs(item)
    return found


def metrics_page(sources: Mapping[str, Any]) -> str:
    """The metric reference: per module that defines metrics, each metric's name, type, labels and help."""
    out = [f"# Metric list\n\n{NOTE} [Monitoring](../how-to/monitoring.md) says which service exports each, "
           "how to scrape them, and the dashboard's queries. `trial` (trainer metrics) and `group` (pool "
           "gauges) are a sweep's trial and its consumer group, empty (no label) in a run: "
           "[Watch a sweep](../how-to/sweeps.md#watch-it).\n"]
    for module, source in sources.items():
        rows = [[_code(m.name), m.type, ", ".join(_code(label) for label in m.labels), _text(m.help)]
                for m in sorted(metric_docs(source))]
        out += [f"## {_code(module)}\n", _table(["metric", "type", "labels", "help"], rows)]
    return "\n".join(out)


def metric_sources() -> dict[str, Any]:
    """Every module of saintpipe that defines Prometheus metrics, with what holds them."""
    from prometheus_client import CollectorRegistry

    from saintpipe.services.feature_shard import metrics as feature_shard
    from saintpipe.services.pool.metrics import PoolMetrics
    from saintpipe.services.sampler_service.counters import WorkerCounters
    from saintpipe.services.sampler_service.metrics import MetricsSnapshot, SamplerCollector
    from saintpipe.trainer import metrics as trainer

    one_worker = MetricsSnapshot({0: WorkerCounters()}, {0: 0})  # a sample each, so that the labels show
    return {
        "saintpipe.services.sampler_service.metrics": SamplerCollector(lambda: one_worker),
        "saintpipe.services.pool.metrics": PoolMetrics(CollectorRegistry()),
        "saintpipe.services.feature_shard.metrics": feature_shard,
        "saintpipe.trainer.metrics": trainer,
    }


# --- alert rules -----------------------------------------------------------------------------------------------

def alerts_page(rules: str) -> str:
    """The alert-rule reference from a Prometheus rules file's text: each rule's expression, wait and labels."""
    import yaml

    out = [f"# Alert rules\n\n{NOTE} The rules are `deploy/prometheus/alerts.yml`; "
           "[Monitoring](../how-to/monitoring.md#when-an-alert-fires) says what each means and what to do when "
           "it fires.\n"]
    for group in yaml.safe_load(rules)["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            labels = rule.get("labels", {})
            notes = rule.get("annotations", {})
            out.append(f"## {rule['alert']}\n")
            out.append(_table(["group", "for", "severity", "other labels"],
                              [[_code(group["name"]), _code(rule.get("for", "0s")),
                                _code(labels.get("severity", "")),
                                ", ".join(_code(f"{k}={v}") for k, v in labels.items() if k != "severity")]]))
            for key in ("summary", "description"):
                if key in notes:
                    out.append(f"**{key.capitalize()}:** {_text(notes[key])}\n")
            out.append(f"```promql\n{rule['expr'].strip()}\n```\n")
    return "\n".join(out)


# --- the build -------------------------------------------------------------------------------------------------

def pages(root: Path = ROOT) -> dict[str, str]:
    """Every generated page: its path under docs/ and its Markdown."""
    from saintpipe.cli import build_parser

    parser, flags = model_flag_index(build_parser)
    return {
        **cli_pages(parser),
        "reference/configuration.md": config_page(config_roots(), flags),
        "reference/metric-list.md": metrics_page(metric_sources()),
        "reference/alert-rules.md": alerts_page((root / "deploy" / "prometheus" / "alerts.yml").read_text()),
    }


def namespace_mirror(root: Path) -> Path:
    """A throw-away directory laid out as the import namespace is (saintpipe/ with services/ and trainer/ in
    it; pyproject.toml's package-dir), links to the checkout's folders: mkdocstrings reads the code from there
    (its static analysis follows folders, not setuptools' mapping)."""
    mirror = Path(tempfile.mkdtemp(prefix="saintpipe-docs-"))
    atexit.register(shutil.rmtree, mirror, ignore_errors=True)
    package = mirror / "saintpipe"
    package.mkdir()
    for entry in (root / "saintpipe").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for folder in ("services", "trainer"):
        (package / folder).symlink_to(root / folder)
    return mirror


@event_priority(100)  # before mkdocstrings' own on_config, which makes its handlers
def on_config(config: Any) -> Any:
    plugin = config.plugins.get("mkdocstrings")
    if plugin is not None:
        python = plugin.config.handlers.setdefault("python", {})
        python["paths"] = [str(namespace_mirror(Path(config.config_file_path).resolve().parent))]
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, text in pages(Path(config.config_file_path).resolve().parent).items():
        files.append(File.generated(config, uri, content=text))
    return files
