"""saintpipe.core.rounds: interleaved rounds, a discarded warm-up, summaries and paired ratios."""

from __future__ import annotations

import math

import pytest

from saintpipe.core.errors import InvalidArgument
from saintpipe.core.report import _fmt
from saintpipe.core.rounds import ratio_figures, round_order, run_rounds, summarize, timed


def _recording(calls: list[str], values: dict[str, list[float]]):
    """Fake measurements: each config returns its next value and records that it ran."""
    iters = {name: iter(v) for name, v in values.items()}

    def make(name: str):
        def measure() -> float:
            calls.append(name)
            return next(iters[name])

        return measure

    return {name: make(name) for name in values}


def test_rounds_rotate_so_each_configuration_goes_first_once_per_cycle():
    calls: list[str] = []
    configs = _recording(calls, {n: [1.0] * 4 for n in "abc"})
    result = run_rounds(configs, rounds=3, warmup=1)
    rounds = [calls[i : i + 3] for i in range(0, len(calls), 3)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert result.measurements == {n: [1.0] * 3 for n in "abc"}  # the warm-up round is not among the measured


def test_warmup_rounds_are_run_and_discarded():
    calls: list[str] = []
    # The first two values of each config are the warm-up's: huge, and must not show up anywhere.
    configs = _recording(calls, {"a": [100.0, 90.0, 1.0, 2.0, 3.0], "b": [50.0, 60.0, 2.0, 2.0, 2.0]})
    result = run_rounds(configs, rounds=3, warmup=2)
    assert len(calls) == 10
    assert result.measurements == {"a": [1.0, 2.0, 3.0], "b": [2.0, 2.0, 2.0]}
    s = result.summary("a")
    assert (s.count, s.median, s.min, s.max) == (3, 2.0, 1.0, 3.0)


def test_no_warmup_keeps_every_round():
    result = run_rounds({"a": lambda: 5.0}, rounds=2, warmup=0)
    assert result.measurements["a"] == [5.0, 5.0]


def test_paired_ratio_is_the_median_of_per_round_ratios_not_the_ratio_of_medians():
    # A noisy machine: round 2 is slow for everybody. Per round, a is always twice b.
    a = [2.0, 4.0, 20.0, 2.2]
    b = [1.0, 2.0, 10.0, 1.1]
    result = run_rounds(_recording([], {"a": [0.0, *a], "b": [0.0, *b]}), rounds=4)
    assert result.ratios("a", "b") == pytest.approx([2.0, 2.0, 2.0, 2.0])
    assert result.ratio("a", "b") == pytest.approx(2.0)
    r = result.ratio_summary("a", "b")
    assert r.min == pytest.approx(2.0) and r.max == pytest.approx(2.0) and r.iqr == pytest.approx(0.0)
    assert result.ratio("b", "a") == pytest.approx(0.5)
    figures = ratio_figures("a_over_b", r)
    assert figures == {"a_over_b_paired": r.median, "a_over_b_paired_range": [r.min, r.max]}
    assert set(ratio_figures("a / b", r, sep=", ")) == {"a / b, paired", "a / b, paired, range"}


def test_ratio_against_a_zero_baseline_is_nan():
    result = run_rounds({"a": lambda: 1.0, "b": lambda: 0.0}, rounds=1, warmup=0)
    assert math.isnan(result.ratios("a", "b")[0])


def test_summary_quartiles_and_spread():
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s.median, s.q1, s.q3, s.iqr) == (3.0, 2.0, 4.0, 2.0)
    assert s.iqr_pct == pytest.approx(100 * 2.0 / 3.0)
    one = summarize([7.0])
    assert (one.median, one.min, one.max, one.iqr, one.iqr_pct) == (7.0, 7.0, 7.0, 0.0, 0.0)
    assert math.isnan(summarize([0.0, 0.0]).iqr_pct)


def test_the_seed_shifts_the_rotation():
    assert round_order(list("abcdef"), 0, seed=2) == list("cdefab")


def test_bad_arguments_are_named():
    with pytest.raises(InvalidArgument, match="no configurations"):
        run_rounds({}, rounds=1)
    with pytest.raises(InvalidArgument, match="rounds must be >= 1"):
        run_rounds({"a": lambda: 1.0}, rounds=0)
    with pytest.raises(InvalidArgument, match="warmup >= 0"):
        run_rounds({"a": lambda: 1.0}, rounds=1, warmup=-1)
    result = run_rounds({"a": lambda: 1.0}, rounds=1)
    with pytest.raises(InvalidArgument, match="no configuration 'z'"):
        result.summary("z")
    with pytest.raises(InvalidArgument, match="no measurements"):
        summarize([])


def test_timed_returns_elapsed_seconds_of_the_call():
    calls = []
    seconds = timed(lambda: calls.append(1))()
    assert calls == [1] and seconds >= 0.0


def test_report_formats_a_range():
    assert _fmt([0.5, 1.25]) == "[0.500, 1.250]"
