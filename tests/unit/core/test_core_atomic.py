"""replacing_dir: a directory is built under a temporary sibling and renamed into place, or not at all."""

from __future__ import annotations

import logging
import os
import signal
import stat
import time

import pytest

from saintpipe.core import atomic
from saintpipe.core.atomic import replace_dir, replacing_dir, temp_sibling
from tests.support.forked import run_in_child


def _hidden(parent):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_creates_the_target_with_its_parents_and_mode_0o755(tmp_path):
    target = tmp_path / "a" / "b" / "out"
    with replacing_dir(target) as tmp:
        assert tmp.parent == target.parent and tmp.name.startswith(".out.saintpipe-tmp-")
        assert not target.exists()  # nothing at the target while it is being built
        (tmp / "file").write_text("new")
    assert (target / "file").read_text() == "new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755
    assert _hidden(target.parent) == []


def test_mode_is_configurable(tmp_path):
    with replacing_dir(tmp_path / "out", mode=0o700):
        pass
    assert stat.S_IMODE(os.stat(tmp_path / "out").st_mode) == 0o700


def test_replaces_an_existing_directory_only_once_the_new_one_is_complete(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old").write_text("old")
    with replacing_dir(target) as tmp:
        (tmp / "new").write_text("new")
        assert (target / "old").read_text() == "old"  # readers still see the old one
    assert sorted(p.name for p in target.iterdir()) == ["new"]
    assert _hidden(tmp_path) == []


def test_a_failure_removes_the_temporary_directory_and_keeps_the_old_one(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old").write_text("old")
    with pytest.raises(OSError, match="disk full"), replacing_dir(target) as tmp:
        (tmp / "half").write_text("half")
        raise OSError("disk full")
    assert sorted(p.name for p in target.iterdir()) == ["old"]
    assert _hidden(tmp_path) == []


def test_a_failure_without_a_target_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt), replacing_dir(tmp_path / "out"):
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_a_failed_final_rename_puts_the_old_directory_back(tmp_path, monkeypatch):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old").write_text("old")
    real_rename = os.rename

    def rename(src, dst):
        if atomic.TMP_INFIX in os.path.basename(src):  # the new directory's rename into place
            raise OSError("rename failed")
        real_rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", rename)
    with pytest.raises(OSError, match="rename failed"), replacing_dir(target) as tmp:
        (tmp / "new").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["old"]
    assert _hidden(tmp_path) == []


def test_temp_sibling_and_replace_dir(tmp_path):
    target = tmp_path / "out"
    first, second = temp_sibling(target), temp_sibling(target)
    assert first != second and first.parent == tmp_path
    (first / "x").write_text("1")
    replace_dir(first, target)
    (second / "y").write_text("2")
    replace_dir(second, target)
    assert sorted(p.name for p in target.iterdir()) == ["y"]
    assert _hidden(tmp_path) == []


# --- what may be replaced, and what is left after a failure (issue 19) ---




@pytest.mark.timeout(60)  # an older replace_dir opened the FIFO (shutil.rmtree) and blocked forever
@pytest.mark.parametrize("make", ["file", "symlink", "fifo"])
def test_only_a_real_directory_is_replaced(tmp_path, make):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("mine")
    target = tmp_path / "out"
    if make == "file":
        target.write_text("precious")
    elif make == "symlink":
        target.symlink_to(elsewhere)
    else:
        os.mkfifo(target)
    before = os.lstat(target)
    with pytest.raises(NotADirectoryError, match="not a directory: not replaced"), replacing_dir(target):
        pytest.fail("the body must not run")
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert (elsewhere / "keep").read_text() == "mine"
    assert _hidden(tmp_path) == []


def test_check_refuses_a_directory_before_and_at_the_final_rename(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("mine")

    def refuse(path):
        raise ValueError(f"{path}: not mine to replace")

    with pytest.raises(ValueError, match="not mine"), replacing_dir(target, check=refuse):
        pytest.fail("the body must not run")
    calls = []

    def swapped_meanwhile(path):  # passes at the start, refuses once renamed aside
        calls.append(path.name)
        if len(calls) > 2:
            raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"), replacing_dir(target, check=swapped_meanwhile) as tmp:
        (tmp / "new").write_text("new")
    assert calls[-1].startswith(".out" + atomic.OLD_INFIX)  # checked again after the rename aside
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    assert _hidden(tmp_path) == []


def test_parents_it_created_are_removed_after_a_failure(tmp_path):
    with pytest.raises(OSError, match="disk full"), replacing_dir(tmp_path / "a" / "b" / "out"):
        raise OSError("disk full")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def default_sigterm():
    """SIGTERM's default disposition for the test (an earlier test in the session, e.g. one starting Ray in
    process, may have installed a handler of its own: replacing_dir then leaves it in place)."""
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, before)


def test_sigterm_in_the_body_exits_through_cleanup_and_restores_the_handler(tmp_path, default_sigterm):
    target = tmp_path / "out"

    def write_and_get_terminated():
        with replacing_dir(target) as tmp:
            (tmp / "half").write_text("half")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the handler raises long before this ends

    assert run_in_child(write_and_get_terminated) == 128 + signal.SIGTERM  # not -SIGTERM: it exited through cleanup
    assert list(tmp_path.iterdir()) == []
    with replacing_dir(target):
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_leftovers_of_killed_writers_are_removed_by_the_next_write(tmp_path, caplog):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old").write_text("old")

    def killed_midway():
        tmp = temp_sibling(target)
        (tmp / "big").write_bytes(b"x" * 1000)
        os.kill(os.getpid(), signal.SIGKILL)

    assert run_in_child(killed_midway) == -signal.SIGKILL
    dead = [p for p in tmp_path.iterdir() if atomic.TMP_INFIX in p.name]
    assert len(dead) == 1 and dead[0].name.startswith(".out" + atomic.TMP_INFIX)
    live = temp_sibling(target)  # this process is alive: another write going on
    other = temp_sibling(tmp_path / "other")  # another target's: not this write's business
    with caplog.at_level(logging.INFO, logger="saintpipe.core.atomic"), replacing_dir(target) as tmp:
        (tmp / "new").write_text("new")
    assert not dead[0].exists()
    assert f"removed {dead[0]}, left by a writer process that is gone (1000 bytes)" in caplog.text
    assert live.is_dir() and other.is_dir()
    assert (target / "new").read_text() == "new"


def test_sibling_names_state_their_owner_and_stay_short(tmp_path):
    from saintpipe.core import shm_owners

    target = tmp_path / ("n" * 250)
    tmp = temp_sibling(target)
    assert len(tmp.name.encode()) <= 255
    assert f"{atomic.TMP_INFIX}{shm_owners.current().tag}-" in tmp.name
    assert atomic.leftovers(target) == []  # its owner, this process, is alive
