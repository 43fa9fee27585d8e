"""Every test module has a name of its own: the test folders are no packages, so pytest imports each module by
its file name, and a second file of the same name in another folder fails the collection of both."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_no_two_test_modules_share_a_file_name():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
