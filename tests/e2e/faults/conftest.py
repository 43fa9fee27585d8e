"""The fault suite's shared fixtures: one dataset and one undisturbed run to compare every fault run with."""

from __future__ import annotations

import pytest

from tests.support.faults import FaultRun, assert_accounted, fault_dataset, score


@pytest.fixture(scope="session")
def fault_data(tmp_path_factory):
    return fault_dataset(tmp_path_factory.mktemp("faults") / "data")


@pytest.fixture(scope="session")
def undisturbed_pair(tmp_path_factory, fault_data) -> list[dict]:
    """Two runs with the suite's seed and no fault, started at once: each one's summary.

    Two at once is itself a case the suite checks (test_two_runs_at_once_both_finish): one pair of runs
    serves that test and gives the reference score, instead of one run for each (a run is some 20 s).
    """
    runs = [FaultRun(tmp_path_factory.mktemp("undisturbed"), fault_data) for _ in range(2)]
    try:
        summaries = []
        for run in runs:
            code = run.finish()
            assert code == 0, run.output()
            summary = run.summary()
            assert summary["restarts"] == [], run.output()
            assert_accounted(summary)
            summaries.append(summary)
        for run in runs:
            assert run.left_behind() == []
        return summaries
    finally:
        for run in runs:
            run.cleanup()


@pytest.fixture(scope="session")
def undisturbed(undisturbed_pair) -> float:
    """The test score of a run with the suite's seed and no fault (the first of the pair)."""
    return score(undisturbed_pair[0])


@pytest.fixture
def fault_run(tmp_path, fault_data):
    """Start a run (``fault_run(run_lines, *args)``: extra lines of [run], CLI arguments); killed at the end."""
    runs: list[FaultRun] = []

    def start(run: str = "", *args: str, home=None) -> FaultRun:
        workdir = tmp_path / f"run{len(runs)}"
        workdir.mkdir()
        started = FaultRun(workdir, fault_data, run, args, home=home)
        runs.append(started)
        return started

    yield start
    for started in runs:
        started.cleanup()
