"""Command-line flags generated from the fields of a config model: one source of ranges, defaults and help.

A service's flags set fields of its pydantic config model (:mod:`saintpipe.core.config`: defaults < file <
``SAINTPIPE_<SECTION>__<FIELD>`` < flags). Written by hand, each flag restated its field's range, default and
meaning, and the copies drifted. Here the flag is made from the field:

* the value's check from the annotation and constraints: an int or a float with its
  ``ge``/``gt``/``le``/``lt`` bounds (an :mod:`saintpipe.core.argtypes` type, so a
  value out of range is argparse's one-line error naming the flag and the range), a
  ``Literal``'s values as ``choices``, ``Path``, ``str``; a bool is a switch that sets
  the field to the opposite of its default (``--no-bulk`` for ``bulk: bool = True``);
* the help from the field's description (its ``description=``, or its docstring in a model
  with ``use_attribute_docstrings``), then the range and the default, read from the model;
* argparse's default is None: a flag not given sets nothing, so the file and the
  environment below it stay in force.

Example:
    >>> import argparse
    >>> from saintpipe.services.pool.config import PoolConfig
    >>> parser = argparse.ArgumentParser()
    >>> pool = add_model_flags(parser, PoolConfig, {"capacity": "--pool-capacity", "job_id": "--job"}, under="pool")
    >>> pool.values(parser.parse_args(["--pool-capacity", "8"]))
    {'pool': {'capacity': 8}}
"""

from __future__ import annotations

import argparse
import math
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import pydantic

from saintpipe.core.argtypes import Bounds, Integer, Real


class ModelFlags:
    """The flags :func:`add_model_flags` added for one model: which argparse dest sets which field."""

    def __init__(self, model: type[pydantic.BaseModel], under: tuple[str, ...]) -> None:
        self.model = model
        self.under = under
        self.fields: dict[str, str] = {}  # argparse dest -> field name
        self.flags: dict[str, str] = {}  # field name -> flag (for messages)

    def values(self, args: argparse.Namespace) -> dict[str, Any]:
        """The fields the command line set, nested under ``under``: the ``flags`` of
        :func:`~saintpipe.core.config.load_config`. Flags not given are left out."""
        given = {field: getattr(args, dest) for dest, field in self.fields.items()
                 if getattr(args, dest, None) is not None}
        for key in reversed(self.under):
            given = {key: given} if given else {}
        return given


def add_model_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    model: type[pydantic.BaseModel],
    fields: Iterable[str] | Mapping[str, str],
    *,
    under: str | tuple[str, ...] = (),
    required: Iterable[str] = (),
) -> ModelFlags:
    """Add one flag per field of ``model`` to ``parser``.

    Args:
        parser: the parser (or argument group) to add to.
        model: the config model the fields belong to.
        fields: field names (flag ``--field-name``), or a mapping of field name to flag
            where the flag's name is not the field's (``{"job_id": "--job"}``).
        under: where ``model`` sits in the config that the values go to (``"pool"`` for the pool
            section inside the sampler service's), for :meth:`ModelFlags.values`.
        required: fields whose flag must be given (where no config file can give the value).

    The argparse dest is the flag's name (``--job`` is ``args.job``; ``--no-bulk`` is ``args.bulk``).

    Raises:
        TypeError: a field whose type has no flag form (a list, a model), a number without an upper
            and a lower bound, or a field without a description.
    """
    names = dict(fields) if isinstance(fields, Mapping) else {f: "--" + f.replace("_", "-") for f in fields}
    out = ModelFlags(model, (under,) if isinstance(under, str) else tuple(under))
    required = set(required)
    for field, flag in names.items():
        info = model.model_fields.get(field)
        if info is None:
            raise TypeError(f"{model.__name__} has no field {field!r}")
        dest = flag.removeprefix("--").removeprefix("no-").replace("-", "_")
        extra: dict[str, Any] = {"required": True} if field in required else {}
        action = parser.add_argument(flag, dest=dest, **_argument(model, field, info, flag), **extra)
        action.model_field = (model, field)  # type: ignore[attr-defined]  # read by model_field()
        out.fields[dest] = field
        out.flags[field] = flag
    return out


def model_field(action: argparse.Action) -> tuple[type[pydantic.BaseModel], str] | None:
    """The config model and field a flag was made from by :func:`add_model_flags` (None: a flag of its own),
    for the generated command-line reference."""
    return getattr(action, "model_field", None)


def _argument(model: type[pydantic.BaseModel], field: str, info: Any, flag: str) -> dict[str, Any]:
    where = f"{model.__name__}.{field} ({flag})"
    if not info.description:
        raise TypeError(f"{where}: the field has no description (its flag's help)")
    description = " ".join(info.description.split()).rstrip(".")
    base = without_none(info.annotation)
    default = None if info.is_required() else info.get_default(call_default_factory=True)
    notes: list[str] = []
    kwargs: dict[str, Any] = {}
    if base is bool:
        value = flag.startswith("--no-")
        if default is not value:
            raise TypeError(f"{where}: a switch sets the field to the opposite of its default ({default!r})")
        kwargs.update(action="store_const", const=not value)
        description = f"{field} = {_shown(not value)} (default {_shown(default)}): {description}"
    elif base in (int, float):
        bounds = field_bounds(info)
        if math.isinf(bounds.min) or math.isinf(bounds.max):
            raise TypeError(f"{where}: a numeric flag needs a lower and an upper bound on its field")
        kwargs["type"] = (Integer(bounds, "integer") if base is int else Real(bounds, "number"))
        notes.append(bounds.describe())
    elif get_origin(base) is Literal:
        kwargs["choices"] = list(get_args(base))
    elif base is Path:
        kwargs["type"] = Path
    elif base is not str:
        raise TypeError(f"{where}: no flag form for a field of type {info.annotation!r}")
    if default is not None and base is not bool:
        notes.append(f"default {_shown(default)}")
    help_text = description + (f" ({'; '.join(notes)})" if notes else "")
    kwargs["help"] = help_text.replace("%", "%%")  # argparse formats help with %
    return kwargs


def without_none(annotation: Any) -> Any:
    """The annotation without ``None`` (``int | None`` is ``int``); a union of other types stays a union."""
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def field_bounds(info: Any) -> Bounds:
    """The range of a numeric field (a pydantic ``FieldInfo``) from its ``ge``/``gt``/``le``/``lt``; a missing
    end is infinite. An open end of an integer field is the closed one next to it: ``lt=2**63`` is
    ``le=2**63 - 1``."""
    low: Any = -math.inf
    high: Any = math.inf
    low_open = high_open = False
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low, low_open = item.ge, False
        elif isinstance(item, annotated_types.Gt):
            low, low_open = item.gt, True
        elif isinstance(item, annotated_types.Le):
            high, high_open = item.le, False
        elif isinstance(item, annotated_types.Lt):
            high, high_open = item.lt, True
    if without_none(info.annotation) is int:
        return Bounds(low if math.isinf(low) else int(low) + low_open,
                      high if math.isinf(high) else int(high) - high_open)
    return Bounds(float(low), float(high), low_open, high_open)


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
