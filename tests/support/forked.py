"""Run a function in a forked child process (a test that must kill or signal the process doing the work)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable


def run_in_child(fn: Callable[[], object], timeout: float = 60) -> int:
    """Run ``fn`` in a forked child; its exit code (negative: killed by that signal)."""
    proc = multiprocessing.get_context("fork").Process(target=fn)
    proc.start()
    proc.join(timeout)
    assert proc.exitcode is not None, "the child did not finish"
    return proc.exitcode
