"""Measure named configurations of a benchmark in interleaved rounds, and summarize them.

A benchmark that measures configuration A, then B, then C on a shared, noisy machine compares A's luck with
C's: whatever happens to the machine during A's turn (a neighbour's job, a cold allocator, the CPU's clock)
lands on A alone. :func:`run_rounds` runs the configurations in rounds instead:

* ``warmup`` rounds first, every configuration once each, whose
  measurements are discarded (compilation, page faults, caches, clocks);
* then ``rounds`` rounds, every configuration once each, in an order that
  rotates from round to round, so that no configuration always goes first.

The result keeps every measurement. :meth:`RoundsResult.summary` gives a
configuration's median, min, max and interquartile range (``iqr_pct``: the IQR
as a percentage of the median, this module's spread measure);
:meth:`RoundsResult.ratio` the median of the per-round ratios of a
configuration to a baseline: both were measured in the same round, under the
same weather, so their ratio is far steadier than the ratio of their medians.

Example::

    >>> result = run_rounds({"a": lambda: 2.0, "b": lambda: 1.0}, rounds=3)
    >>> result.summary("a").median, result.ratio("a", "b")
    (2.0, 2.0)

Measurements are whatever the callables return (seconds, or a rate): a ratio
above 1 means "slower" for times and "faster" for rates.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from saintpipe.core.errors import InvalidArgument

Measure = Callable[[], float]


@dataclass(frozen=True)
class Summary:
    """Order statistics of a list of measurements (quartiles interpolate, as numpy's default)."""

    count: int
    median: float
    min: float
    max: float
    q1: float
    q3: float

    @property
    def iqr(self) -> float:
        """The interquartile range, in the measurements' unit."""
        return self.q3 - self.q1

    @property
    def iqr_pct(self) -> float:
        """The interquartile range as a percentage of the median: the spread reported beside it."""
        return 100.0 * self.iqr / abs(self.median) if self.median else math.nan


def summarize(values: Sequence[float]) -> Summary:
    """The :class:`Summary` of ``values`` (at least one).

    Raises:
        InvalidArgument: ``values`` is empty.
    """
    if not values:
        raise InvalidArgument("summarize: no measurements")
    data = [float(v) for v in values]
    if len(data) == 1:
        q1 = q3 = data[0]
    else:
        q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive")
    return Summary(len(data), statistics.median(data), min(data), max(data), q1, q3)


@dataclass(frozen=True)
class RoundsResult:
    """Every measured round of every configuration (warm-up rounds left out): ``measurements[name][r]`` was
    taken in measured round ``r``."""

    measurements: Mapping[str, list[float]]

    def summary(self, name: str) -> Summary:
        """Median, min, max and quartiles of ``name``'s measurements."""
        return summarize(self._values(name))

    def ratios(self, name: str, baseline: str) -> list[float]:
        """``name`` over ``baseline``, round by round (NaN where the baseline measured 0)."""
        return [a / b if b else math.nan for a, b in zip(self._values(name), self._values(baseline))]

    def ratio(self, name: str, baseline: str) -> float:
        """The median of the per-round ratios of ``name`` to ``baseline``."""
        return statistics.median(self.ratios(name, baseline))

    def ratio_summary(self, name: str, baseline: str) -> Summary:
        """The :class:`Summary` of the per-round ratios of ``name`` to ``baseline``."""
        return summarize(self.ratios(name, baseline))

    def _values(self, name: str) -> list[float]:
        try:
            return self.measurements[name]
        except KeyError:
            raise InvalidArgument(
                f"no configuration {name!r} in these rounds; measured: {', '.join(self.measurements)}"
            ) from None


def round_order(names: Sequence[str], index: int, *, seed: int = 0) -> list[str]:
    """The order in which round ``index`` (warm-up rounds count from 0) runs ``names``.

    Rotated by ``index + seed`` places, so over ``len(names)`` consecutive
    rounds each configuration goes first once.
    """
    names = list(names)
    k = (index + seed) % len(names) if names else 0
    return names[k:] + names[:k]


def run_rounds(configs: Mapping[str, Measure], rounds: int, warmup: int = 1, seed: int = 0) -> RoundsResult:
    """Run every configuration once per round, ``warmup`` discarded rounds first.

    Args:
        configs: name -> a callable that runs the configuration once and returns its measurement.
        rounds: measured rounds (>= 1).
        warmup: rounds run first and discarded (>= 0).
        seed: where the rotation starts.

    Returns:
        The measurements of the measured rounds, per configuration in round order.

    Raises:
        InvalidArgument: no configurations, ``rounds < 1`` or ``warmup < 0``.
    """
    if not configs:
        raise InvalidArgument("run_rounds: no configurations to measure")
    if rounds < 1 or warmup < 0:
        raise InvalidArgument(f"run_rounds: rounds must be >= 1 and warmup >= 0, got {rounds} and {warmup}")
    names = list(configs)
    measurements: dict[str, list[float]] = {name: [] for name in names}
    for index in range(warmup + rounds):
        values = {name: float(configs[name]()) for name in round_order(names, index, seed=seed)}
        if index >= warmup:
            for name in names:
                measurements[name].append(values[name])
    return RoundsResult(measurements)


def timed(fn: Callable[[], Any]) -> Measure:
    """A measurement of ``fn``: its wall-clock seconds (``time.perf_counter``)."""

    def measure() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return measure


def ratio_figures(key: str, summary: Summary, sep: str = "_") -> dict[str, Any]:
    """Report keys of a paired ratio's summary: ``<key>_paired`` (the median of the per-round ratios) and
    ``<key>_paired_range`` (``[min, max]`` over the rounds); ``sep`` joins the key and the suffixes."""
    return {f"{key}{sep}paired": summary.median, f"{key}{sep}paired{sep}range": [summary.min, summary.max]}
