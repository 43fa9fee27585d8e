"""The reaper: when its process dies, everything started under the mark dies too, and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

from saintpipe.core.reaper import MARK, Tracker

# A stand-in for a run: it starts the reaper, starts a child under the mark (which starts a grandchild
# later, as Ray's raylet starts its agents and workers), and a child outside it; prints their pids; waits.
PARENT = textwrap.dedent("""
    import subprocess, sys, time
    from saintpipe.core.reaper import start_reaper
    reaper = start_reaper()
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    with reaper.marking():
        marked = subprocess.Popen([sys.executable, "-c",
            "import subprocess, sys, time; time.sleep(0.3); "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
            "print(p.pid, flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    unmarked = subprocess.Popen(sleeper)
    grandchild = marked.stdout.readline().strip()
    print(reaper.watchdog.pid, marked.pid, grandchild, unmarked.pid, flush=True)
    time.sleep(120)
""")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (alive := [p for p in pids if not _gone(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_a_killed_parent_takes_the_marked_processes_along_and_only_those():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              env={k: v for k, v in os.environ.items() if k != MARK})
    unmarked = None
    try:
        watchdog, marked, grandchild, unmarked = map(int, parent.stdout.readline().split())
        assert not _gone(marked) and not _gone(grandchild)
        parent.kill()
        parent.wait()
        assert _wait_gone([watchdog, marked, grandchild]) == [], "marked processes outlived their run"
        assert not _gone(unmarked), "a process started outside the mark was reaped"
    finally:
        parent.kill()
        if unmarked is not None and not _gone(unmarked):
            os.kill(unmarked, signal.SIGKILL)


def test_an_orderly_stop_reaps_the_stragglers_and_unmarks_the_environment():
    from saintpipe.core.reaper import start_reaper

    reaper = start_reaper()
    assert reaper is not None  # Linux, main thread
    with reaper.marking():
        straggler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    assert MARK not in os.environ
    try:
        tracker = Tracker(reaper.token)  # the marked processes (other than this one) and their descendants
        tracker.scan()
        assert list(tracker.known) == [straggler.pid]
        reaper.stop()
        assert reaper.watchdog.poll() is not None
        assert straggler.wait(10) == -signal.SIGKILL
    finally:
        straggler.kill()
        straggler.wait()


def test_off_the_main_thread_there_is_no_reaper():
    import threading

    from saintpipe.core.reaper import start_reaper

    got = []
    thread = threading.Thread(target=lambda: got.append(start_reaper()))
    thread.start()
    thread.join()
    assert got == [None]


def test_a_descendant_whose_environment_no_longer_shows_the_mark_is_followed_and_reaped():
    # Ray's agents rewrite their title, which overwrites what /proc/PID/environ shows (the mark too):
    # a grandchild started from a marked child with a clean environment stands for them.
    parent = subprocess.Popen([sys.executable, "-c", PARENT.replace(
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); ",
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], env={}); ")],
        stdout=subprocess.PIPE, text=True, env={k: v for k, v in os.environ.items() if k != MARK})
    unmarked = None
    try:
        watchdog, marked, grandchild, unmarked = map(int, parent.stdout.readline().split())
        with open(f"/proc/{grandchild}/environ", "rb") as f:
            assert MARK.encode() not in f.read()
        time.sleep(1.5)  # the watchdog follows descendants every SCAN_INTERVAL_S (0.5 s)
        parent.kill()
        parent.wait()
        assert _wait_gone([watchdog, marked, grandchild]) == [], "a descendant of a marked process outlived the run"
        assert not _gone(unmarked)
    finally:
        parent.kill()
        for pid in (unmarked,):
            if pid is not None and not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_run_s_orphaned_shared_memory_goes_and_another_process_s_stays(tmp_path, monkeypatch):
    """After a run ends, its watchdog removes the /dev/shm files its killed processes left, never those of
    other dead processes (another run's, a test's): ``saintpipe doctor --clean`` is for those."""
    import subprocess

    from saintpipe.core import shm_owners
    from saintpipe.core.reaper import remove_orphaned_files

    monkeypatch.setattr(shm_owners, "SHM_DIR", tmp_path)
    dead = []
    for _ in range(2):  # two processes that made a feature region each, and are gone
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        owner = shm_owners.Owner(shm_owners.pid_namespace(), proc.pid, shm_owners.start_time(proc.pid))
        proc.kill()
        proc.wait()
        dead.append(owner)
    ours, theirs = (tmp_path / f"{shm_owners.FEATURE_PREFIX}{o.tag}-{'ab' * 8}" for o in dead)
    ours.write_bytes(b"x")
    theirs.write_bytes(b"x")
    assert remove_orphaned_files({dead[0].pid}) == [ours.name]
    assert not ours.exists() and theirs.exists()
