"""Seconds per test folder and the slowest tests, from the JUnit XML files of a test run.

    SAINTPIPE_TEST_TIMES=/tmp/times ./scripts/test.sh     # each phase writes /tmp/times/<phase>.xml
    python scripts/test_times.py /tmp/times/*.xml          # the tables of docs/explanation/test-suite.md
    python scripts/test_times.py --slowest 30 /tmp/times/*.xml

A test's seconds are JUnit's: setup, call and teardown together, so a session fixture's start-up (a Redis, a
local Ray, an undisturbed run) is counted in the first test that uses it. With several files (the parallel
and the serial phase) the folders add up over them; the seconds are the sum of the tests' own times, not
the wall clock of a phase that ran them on several workers.
"""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ET
from pathlib import Path


def read_cases(paths: list[Path]) -> list[tuple[str, str, float, str]]:
    """``(folder, test id, seconds, outcome)`` for every test case in the files."""
    cases = []
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            module = case.get("classname", "")
            parts = module.split(".")
            folder = "/".join(parts[:3]) if len(parts) >= 3 else module
            outcome = "skipped" if case.find("skipped") is not None else (
                "failed" if case.find("failure") is not None or case.find("error") is not None else "passed")
            cases.append((folder, f"{module}::{case.get('name', '')}", float(case.get("time", 0.0)), outcome))
    return cases


def folder_table(cases: list[tuple[str, str, float, str]]) -> str:
    seconds, count = collections.Counter(), collections.Counter()
    for folder, _, t, _ in cases:
        seconds[folder] += t
        count[folder] += 1
    lines = ["| folder | tests | seconds |", "|---|---:|---:|"]
    for level in ("tests/unit", "tests/integration", "tests/e2e"):
        folders = sorted(f for f in seconds if f.startswith(level + "/"))
        lines.append(f"| **{level}** | **{sum(count[f] for f in folders)}** | "
                     f"**{sum(seconds[f] for f in folders):.0f}** |")
        lines += [f"| {f[len('tests/'):]} | {count[f]} | {seconds[f]:.1f} |" for f in folders]
    lines.append(f"| **all** | **{sum(count.values())}** | **{sum(seconds.values()):.0f}** |")
    return "\n".join(lines)


def slowest_table(cases: list[tuple[str, str, float, str]], n: int) -> str:
    lines = ["| seconds | test |", "|---:|---|"]
    for _, name, t, outcome in sorted(cases, key=lambda c: -c[2])[:n]:
        lines.append(f"| {t:.1f} | `{name}`{'' if outcome == 'passed' else f' ({outcome})'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="JUnit XML files (pytest --junitxml)")
    parser.add_argument("--slowest", type=int, default=30, help="how many of the slowest tests to list")
    args = parser.parse_args()
    missing = [str(p) for p in args.files if not p.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    cases = read_cases(args.files)
    outcomes = collections.Counter(c[3] for c in cases)
    print(folder_table(cases))
    print()
    print(", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())))
    print()
    print(slowest_table(cases, args.slowest))


if __name__ == "__main__":
    main()
