"""Owners of /dev/shm files: who made a file, whether that process still runs, and which files are leftovers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil

from saintpipe.core import shm_owners
from saintpipe.core.shm_owners import ALIVE, DEAD, ELSEWHERE, KEPT, UNKNOWN, Kind, Owner


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_this_process_is_alive_and_its_tag_reads_back():
    me = shm_owners.current()
    assert me.pid == os.getpid() and me.namespace == shm_owners.pid_namespace() and me.start
    match = re.fullmatch(shm_owners.OWNER_PATTERN, me.tag)
    assert match and Owner.from_groups(*match.groups()) == me
    assert shm_owners.status(me) == ALIVE


def test_a_dead_pid_of_this_namespace_is_dead_and_nothing_else_is():
    here = shm_owners.pid_namespace()
    gone = dead_pid()
    assert shm_owners.status(Owner(here, gone, None)) == DEAD
    assert shm_owners.status(Owner(here, gone, 12345)) == DEAD
    assert shm_owners.status(Owner(here + 1, gone, None)) == ELSEWHERE  # a container's: never judged here
    assert shm_owners.status(None) == UNKNOWN
    assert shm_owners.status(Owner(here, 0, None)) == UNKNOWN  # os.kill(0) would signal our own group
    assert shm_owners.status(Owner(here, 2**40, None)) == UNKNOWN


def test_a_reused_pid_is_told_apart_by_its_start_time():
    me = shm_owners.current()
    assert shm_owners.status(Owner(me.namespace, me.pid, me.start + 1)) == DEAD  # our pid, another start
    assert shm_owners.status(Owner(me.namespace, me.pid, None)) == ALIVE  # no start time: the pid decides


def test_without_a_pid_namespace_nothing_is_dead(monkeypatch):
    gone = dead_pid()
    owner = Owner(shm_owners.pid_namespace(), gone, None)
    monkeypatch.setattr(shm_owners, "pid_namespace", lambda: 0)
    assert shm_owners.status(owner) == UNKNOWN


def test_start_time_reads_past_a_command_name_with_parentheses_and_spaces():
    code = ("import ctypes, time; ctypes.CDLL(None).prctl(15, b'a) b (c', 0, 0, 0); "
            "print('ok', flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ok"
        assert psutil.Process(child.pid).name() == "a) b (c"
        ticks = shm_owners.start_time(child.pid)
        started = psutil.boot_time() + ticks / os.sysconf("SC_CLK_TCK")
        assert abs(started - psutil.Process(child.pid).create_time()) < 1.0
    finally:
        child.kill()
        child.wait()
    assert shm_owners.start_time(child.pid) is None


# A made-up kind: "test-<group>-<owner tag>".
_PATTERN = re.compile(r"test-([a-z]+)-" + shm_owners.OWNER_PATTERN)


def _owner(name: str) -> Owner | None:
    match = _PATTERN.fullmatch(name)
    return Owner.from_groups(*match.group(2, 3, 4)) if match else None


def _group(name: str) -> str | None:
    match = _PATTERN.fullmatch(name)
    return match.group(1) if match else None


KINDS = [Kind("test file", "test-", _owner, _group), Kind("marker", "test-marker", _owner, keep=True)]


def _make(directory: Path, name: str, size: int = 10) -> Path:
    path = directory / name
    path.write_bytes(b"x" * size)
    return path


def test_scan_marks_dead_owners_files_as_leftovers_unless_their_group_lives(tmp_path):
    me, here, gone = shm_owners.current(), shm_owners.pid_namespace(), dead_pid()
    dead = Owner(here, gone, 7).tag
    _make(tmp_path, f"test-lonely-{dead}", 100)  # dead, alone in its group: a leftover
    _make(tmp_path, f"test-busy-{dead}")  # dead, but its group has a live member: kept
    _make(tmp_path, f"test-busy-{me.tag}")
    _make(tmp_path, f"test-far-{Owner(here + 1, gone, 7).tag}")  # another PID namespace
    _make(tmp_path, "test-handmade")  # no owner
    _make(tmp_path, "test-marker")  # kept on purpose, though it matches "test-" too
    _make(tmp_path, "other-file")  # not ours at all
    os.symlink(tmp_path / "other-file", tmp_path / f"test-link-{dead}")  # not a regular file
    found = {f.name: f for f in shm_owners.scan(tmp_path, KINDS)}
    assert sorted(found) == sorted([f"test-lonely-{dead}", f"test-busy-{dead}", f"test-busy-{me.tag}",
                                    f"test-far-{Owner(here + 1, gone, 7).tag}", "test-handmade", "test-marker"])
    assert {n: (f.status, f.leftover) for n, f in found.items()} == {
        f"test-lonely-{dead}": (DEAD, True),
        f"test-busy-{dead}": (DEAD, False),
        f"test-busy-{me.tag}": (ALIVE, False),
        f"test-far-{Owner(here + 1, gone, 7).tag}": (ELSEWHERE, False),
        "test-handmade": (UNKNOWN, False),
        "test-marker": (KEPT, False),
    }
    assert found[f"test-lonely-{dead}"].size == 100 and found["test-marker"].kind == "marker"
    assert found[f"test-lonely-{dead}"].owner == Owner(here, gone, 7)
    assert [f.name for f in shm_owners.leftovers(tmp_path, KINDS)] == [f"test-lonely-{dead}"]
    assert shm_owners.scan(tmp_path / "missing", KINDS) == []


def test_remove_leftovers_removes_only_leftovers_and_honours_keep(tmp_path):
    here, gone = shm_owners.pid_namespace(), dead_pid()
    a = _make(tmp_path, f"test-a-{Owner(here, gone, 7).tag}")
    b = _make(tmp_path, f"test-b-{Owner(here, gone, 7).tag}")
    live = _make(tmp_path, f"test-c-{shm_owners.current().tag}")
    removed = shm_owners.remove_leftovers(tmp_path, KINDS, keep=lambda f: f.group == "b")
    assert [f.path for f in removed] == [a]
    assert not a.exists() and b.exists() and live.exists()
    assert shm_owners.remove([shm_owners.ShmFile("test file", a, 0, None, DEAD)]) == []  # gone already


def test_remove_leftovers_never_raises(tmp_path, caplog):
    def broken(name: str) -> Owner | None:
        raise RuntimeError("boom")

    _make(tmp_path, "test-x")
    with caplog.at_level("WARNING"):
        assert shm_owners.remove_leftovers(tmp_path, [Kind("broken", "test-", broken)]) == []
    assert "could not remove leftover" in caplog.text


def test_a_file_that_cannot_be_removed_is_skipped(tmp_path, monkeypatch):
    gone = dead_pid()
    path = _make(tmp_path, f"test-a-{Owner(shm_owners.pid_namespace(), gone, 7).tag}")

    def refused(path):
        raise PermissionError(1, "Operation not permitted", str(path))  # another user's, in the sticky /dev/shm

    monkeypatch.setattr(shm_owners.os, "unlink", refused)
    assert shm_owners.remove_leftovers(tmp_path, KINDS) == []
    assert path.exists()
