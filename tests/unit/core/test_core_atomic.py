"""replacing_dir: a directory is built under a temporary sibling and renamed into place, or not at all."""

from __future__ import annotations

import os
import stat

import pytest

from saintpipe.core import atomic
from saintpipe.core.atomic import replace_dir, replacing_dir, temp_sibling


def _hidden(parent):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_creates_the_target_with_its_parents_and_mode_0o755(tmp_path):
    target = tmp_path / "a" / "b" / "out"
    with replacing_dir(target) as tmp:
        assert tmp.parent == target.parent and tmp.name.startswith(".out.tmp-")
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
