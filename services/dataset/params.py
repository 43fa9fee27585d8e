"""Validation of the numeric arguments of the dataset generators and importers.

These functions are public API as well as the code behind CLI flags, so they
check their arguments themselves; errors name the argument as its flag
(``--nodes``) where it has one, so a CLI user can act on the message.
"""

from __future__ import annotations

import math
import operator

from saintpipe.core.errors import InvalidArgument
from saintpipe.core.seeds import SEED_MAX

# Node ids are stored as int32.
MAX_NODES = 2**31 - 1


def require_int(flag: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``; InvalidArgument ``"--nodes must be at least 1, got -5"`` otherwise."""
    if isinstance(value, bool):
        raise InvalidArgument(f"{flag} must be an integer, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise InvalidArgument(f"{flag} must be an integer, got {value!r}") from None
    if number < low:
        raise InvalidArgument(f"{flag} must be at least {low:,}, got {number:,}")
    if high is not None and number > high:
        raise InvalidArgument(f"{flag} must be at most {high:,}, got {number:,}")
    return number


def require_float(flag: str, value: object, low: float, high: float | None = None, *,
                  low_open: bool = False) -> float:
    """``value`` as a finite float in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgument(f"{flag} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise InvalidArgument(f"{flag} must be a finite number, got {value!r}")
    if number < low or (low_open and number == low):
        raise InvalidArgument(f"{flag} must be {'greater than' if low_open else 'at least'} {low:g}, got {number:g}")
    if high is not None and number > high:
        raise InvalidArgument(f"{flag} must be at most {high:g}, got {number:g}")
    return number


def require_seed(value: object, flag: str = "--seed") -> int:
    """A random seed in ``[0, SEED_MAX]`` (:mod:`saintpipe.core.seeds`; numpy refuses negative seeds with a traceback)."""
    return require_int(flag, value, 0, SEED_MAX)
