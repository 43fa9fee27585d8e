"""The field names of a nested pydantic model at a validation error's location.

pydantic reports an unknown key (``extra="forbid"``) as "Extra inputs are not
permitted" at its location; a user who typed ``num_roots`` for ``roots`` needs
the names that are accepted there, which the error does not carry.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Sequence, Union, get_args, get_origin

import pydantic


def _models(annotation: Any) -> list[type[pydantic.BaseModel]]:
    """The model classes an annotation can hold (through Annotated, Optional and unions)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _models(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [m for arg in get_args(annotation) for m in _models(arg)]
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return [annotation]
    return []


def _tagged(model: type[pydantic.BaseModel], tag: str) -> bool:
    """Whether a field of ``model`` is a Literal that holds ``tag`` (a discriminated union's member)."""
    return any(get_origin(f.annotation) is Literal and tag in get_args(f.annotation)
               for f in model.model_fields.values())


def fields_at(model: type[pydantic.BaseModel], loc: Sequence[str | int]) -> list[str] | None:
    """The sorted field names of the model that ``loc`` leads to, or None when it leads to no model.

    ``loc`` is a pydantic error location without its last step; a step that names
    a tagged union's member (``("sampler", "node")``) picks that member.

    Example: ``fields_at(SamplerServiceConfig, ("sampler", "node"))`` is the node sampler's fields,
    ``['clip_multiple', 'kappa', 'kind', 'node_budget', 'uniform_mix']``.
    """
    candidates: list[type[pydantic.BaseModel]] = [model]
    for step in map(str, loc):
        if len(candidates) > 1:  # a union: this step is the member's tag
            candidates = [m for m in candidates if _tagged(m, step)]
            continue
        if len(candidates) != 1 or step not in candidates[0].model_fields:
            return None
        candidates = _models(candidates[0].model_fields[step].annotation)
    return sorted(candidates[0].model_fields) if len(candidates) == 1 else None
