"""Argument types for numeric flags: each carries its allowed range and names it when a value falls outside.

``type=int`` lets ``--nodes -5`` or ``--seed -1`` through to code that then
fails deep inside numpy with a traceback; these types refuse such values while
argparse parses, so the user sees one line naming the flag and the range::

    saintpipe data generate demo: error: argument --nodes: must be an integer from 1 to 2147483647, got -5

Every type has a ``bounds`` attribute (a :class:`Bounds`), so a test can walk
the parser and check each flag against its declared range.

Example:
    >>> nodes = integer(min=1, max=2**31 - 1)
    >>> nodes("30000")
    30000
    >>> nodes.bounds.describe()
    'from 1 to 2147483647'
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from saintpipe.core.seeds import SEED_MAX

PORT_MAX = 65535
_SHOWN = 40  # characters of a rejected value quoted in the message


@dataclass(frozen=True)
class Bounds:
    """An interval: ``min`` and ``max`` included unless ``min_open`` / ``max_open``."""

    min: int | float
    max: int | float
    min_open: bool = False
    max_open: bool = False

    def contains(self, value: int | float) -> bool:
        above = value > self.min if self.min_open else value >= self.min
        below = value < self.max if self.max_open else value <= self.max
        return above and below

    def describe(self) -> str:
        lo, hi = _number(self.min), _number(self.max)
        if not self.min_open and not self.max_open:
            return f"from {lo} to {hi}"
        low = f"greater than {lo}" if self.min_open else f"at least {lo}"
        high = f"less than {hi}" if self.max_open else f"at most {hi}"
        return f"{low} and {high}"


def _number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1073741824, not 1.07374e+09
    return str(value) if isinstance(value, int) else f"{value:g}"


def _shown(text: str) -> str:
    text = str(text)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


class _Numeric:
    """Common part of :class:`Integer` and :class:`Real`: parse, check the range, say what is allowed."""

    what = "a number"

    def __init__(self, bounds: Bounds, name: str) -> None:
        if not bounds.min <= bounds.max:
            raise ValueError(f"empty range {bounds}")
        self.bounds = bounds
        self.__name__ = name  # argparse names the type by it in its own messages

    def _parse(self, text: str) -> int | float:
        raise NotImplementedError

    def __call__(self, text: str) -> int | float:
        try:
            value = self._parse(text)
        except (TypeError, ValueError):
            # Quoted: the text is not a number at all (as opposed to a number out of range).
            raise argparse.ArgumentTypeError(self.message(repr(_shown(text)))) from None
        if not self.bounds.contains(value):
            raise argparse.ArgumentTypeError(self.message(_shown(text.strip())))
        return value

    def message(self, shown: str) -> str:
        return f"must be {self.what} {self.bounds.describe()}, got {shown}"

    def __repr__(self) -> str:
        b = self.bounds
        opens = "".join(f", {k}=True" for k in ("min_open", "max_open") if getattr(b, k))
        return f"{self.__name__}(min={b.min!r}, max={b.max!r}{opens})"


class Integer(_Numeric):
    """A base-10 integer within :attr:`bounds`."""

    what = "an integer"

    def _parse(self, text: str) -> int:
        # int() raises ValueError for text of more than 4300 digits too: no huge conversions.
        return int(text.strip(), 10)


class Real(_Numeric):
    """A finite decimal number within :attr:`bounds`; NaN and infinities are refused."""

    what = "a number"

    def _parse(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(text)
        return value


def integer(min: int, max: int) -> Integer:
    """An argparse type for integers from ``min`` to ``max`` (both included)."""
    return Integer(Bounds(int(min), int(max)), "integer")


def real(min: float, max: float, *, min_open: bool = False, max_open: bool = False) -> Real:
    """An argparse type for finite numbers between ``min`` and ``max`` (each excluded when ``*_open``)."""
    return Real(Bounds(float(min), float(max), min_open, max_open), "number")


def seed() -> Integer:
    """An argparse type for random seeds: 0 to :data:`~saintpipe.core.seeds.SEED_MAX` (2**63 - 1)."""
    return Integer(Bounds(0, SEED_MAX), "seed")


def port(*, allow_zero: bool = True) -> Integer:
    """An argparse type for TCP ports; 0 (a free port, picked at bind time) only with ``allow_zero``."""
    return Integer(Bounds(0 if allow_zero else 1, PORT_MAX), "port")
