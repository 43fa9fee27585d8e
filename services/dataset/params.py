"""The numeric arguments of the dataset generators: one model each, for their flags and their API.

:class:`DemoParams` and :class:`KroneckerParams` hold each argument's range,
default and meaning once. ``saintpipe data generate`` makes its flags from them
(:func:`saintpipe.core.model_flags.add_model_flags`: argparse refuses a value out
of range, naming the flag), and the generators, which are public API as well,
check their arguments against the same fields with :func:`check`: errors name an
argument as its flag (``--nodes must be at least 1, got -5``) where it has one,
so a CLI user can act on the message.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

import pydantic
from pydantic import Field

from saintpipe.core.argtypes import Bounds
from saintpipe.core.config import StrictModel
from saintpipe.core.errors import InvalidArgument
from saintpipe.core.model_flags import field_bounds
from saintpipe.core.seeds import SEED_MAX, Seed

# Node ids are stored as int32.
MAX_NODES = 2**31 - 1
# 2**30 nodes: past any graph one host builds (the memory check refuses far smaller ones).
MAX_SCALE = 30
# Every seed argument's range (saintpipe.core.seeds).
SEED_BOUNDS = Bounds(0, SEED_MAX)


class DemoParams(StrictModel):
    """The demo dataset (:func:`saintpipe.services.dataset.demo.generate_demo`): planted communities."""

    num_nodes: int = Field(30_000, ge=1, le=MAX_NODES, description="number of nodes")
    num_classes: int = Field(8, ge=1, le=MAX_NODES, description="label classes (planted communities)")
    mean_degree: float = Field(12.0, ge=0.0, le=MAX_NODES, description="mean degree")
    feature_dim: int = Field(64, ge=1, description="feature columns")
    homophily: float = Field(0.8, ge=0.0, le=1.0, description="share of edges inside a node's community")
    noise: float = Field(3.0, ge=0.0, description="standard deviation of the features around their class mean")
    seed: Seed = Field(0, description="random seed")


class KroneckerParams(StrictModel):
    """A Kronecker (R-MAT) graph (:func:`saintpipe.services.dataset.kronecker.generate_kronecker`)."""

    scale: int = Field(ge=1, le=MAX_SCALE, description="the graph has 2^SCALE nodes")
    degree: float = Field(gt=0.0, le=2**30, description="mean degree (directed entries / N), below N - 1")
    seed: Seed = Field(0, description="random seed")
    feature_dim: int = Field(50, ge=1, le=2**20, description="feature columns")
    num_classes: int = Field(10, ge=1, le=2**20, description="label classes, at most N")


# The arguments that have a flag of another name: the CLI's flags and the generators' messages use them.
DEMO_FLAGS = {"num_nodes": "--nodes", "seed": "--seed"}
KRONECKER_FLAGS = {"scale": "--scale", "degree": "--degree", "seed": "--seed", "feature_dim": "--feature-dim",
                   "num_classes": "--classes"}
DEMO = DemoParams()


def check(model: type[pydantic.BaseModel], flags: Mapping[str, str], *, lower_only: frozenset[str] = frozenset(),
          **values: object) -> dict[str, Any]:
    """``values`` (arguments named as fields of ``model``) checked against the fields' types and ranges.

    Args:
        flags: the flag of each argument that has one: messages name the argument by it.
        lower_only: arguments whose upper bound is not checked now (a caller that checks it later).

    Returns:
        The values as ints or floats.

    Raises:
        InvalidArgument: ``"--nodes must be at least 1, got -5"``.
    """
    out = {}
    for field, value in values.items():
        info = model.model_fields[field]
        bounds = field_bounds(info)
        if field in lower_only:
            bounds = Bounds(bounds.min, math.inf, bounds.min_open)
        out[field] = require(flags.get(field, field), value, bounds, info.annotation is int)
    return out


def require(name: str, value: object, bounds: Bounds, integral: bool) -> int | float:
    """``value`` as an int (``integral``) or a finite float within ``bounds``, else InvalidArgument naming ``name``."""
    number: int | float
    if integral:
        try:
            if isinstance(value, bool):
                raise TypeError
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise InvalidArgument(f"{name} must be an integer, got {value!r}") from None
        shown = "{:,}"
    else:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InvalidArgument(f"{name} must be a number, got {value!r}") from None
        if not math.isfinite(number):
            raise InvalidArgument(f"{name} must be a finite number, got {value!r}")
        shown = "{:g}"
    if number < bounds.min or (bounds.min_open and number == bounds.min):
        least = "greater than" if bounds.min_open else "at least"
        raise InvalidArgument(f"{name} must be {least} {shown.format(bounds.min)}, got {shown.format(number)}")
    if number > bounds.max or (bounds.max_open and number == bounds.max):
        most = "less than" if bounds.max_open else "at most"
        raise InvalidArgument(f"{name} must be {most} {shown.format(bounds.max)}, got {shown.format(number)}")
    return number
