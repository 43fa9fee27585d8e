"""Writing a dataset never destroys what is at --out or beside it (issue 19, findings 2, 4 and 6).

``overwrite`` (``--force``) replaces only a dataset directory; anything else is
refused before any work, naming the path and what it is. Inputs and output
must not overlap. Nothing is left beside the output after a failure, and the
temporary directories of killed writers are removed by the next write.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest

from saintpipe.core import atomic
from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import store
from saintpipe.services.dataset.reshard import reshard_dataset
from saintpipe.services.dataset.store import open_dataset, write_dataset
from tests.support.forked import run_in_child

NOT_A_DATASET = "exists and is not a saintpipe dataset ({}); --force only replaces a dataset: " \
                "choose another --out or remove it yourself"


def _beside(parent) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))




def test_force_keeps_a_user_directory_that_is_not_a_dataset(tmp_path, make_tiny):
    out = tmp_path / "userdir"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    for overwrite in (True, False):
        with pytest.raises(DatasetError) as err:
            write_dataset(out, overwrite=overwrite, **make_tiny())
        assert str(err.value) == f"{out}: " + NOT_A_DATASET.format("no manifest.json")
    assert (out / "notes.txt").read_text() == "precious" and sorted(os.listdir(out)) == ["notes.txt"]
    assert _beside(tmp_path) == []


@pytest.mark.timeout(60)  # an older saintpipe opened the FIFO and blocked forever
@pytest.mark.parametrize("kind, why", [
    ("file", "a regular file"),
    ("symlink", "a symbolic link to {target}; links are not followed"),
    ("fifo", "a FIFO"),
    ("manifest-fifo", "its manifest.json is a FIFO"),
    ("bad-manifest", "manifest.json: not valid JSON: Expecting value: line 1 column 1 (char 0)"),
])
def test_force_refuses_anything_but_a_dataset_and_changes_nothing(tmp_path, make_tiny, tiny_dataset, kind, why):
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("precious")
    elif kind == "symlink":
        out.symlink_to(tiny_dataset)  # a link to a real dataset: still not replaced, nor followed
    elif kind == "fifo":
        os.mkfifo(out)  # opened for reading, it would block forever
    else:
        out.mkdir()
        if kind == "manifest-fifo":
            os.mkfifo(out / "manifest.json")
        else:
            (out / "manifest.json").write_text("not json")
    before = os.lstat(out)
    with pytest.raises(DatasetError) as err:
        write_dataset(out, overwrite=True, **make_tiny(seed=3))
    assert str(err.value) == f"{out}: " + NOT_A_DATASET.format(why.format(target=tiny_dataset))
    after = os.lstat(out)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    open_dataset(tiny_dataset, verify=True)
    assert _beside(tmp_path) == []


def test_force_refuses_a_device(tmp_path, make_tiny):
    out = tmp_path / "null"
    try:
        os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a second /dev/null
    except PermissionError:
        pytest.skip("creating a device needs root (CAP_MKNOD)")
    with pytest.raises(DatasetError, match=r"null: exists and is not a saintpipe dataset \(a character device\)"):
        write_dataset(out, overwrite=True, **make_tiny())
    assert stat.S_ISCHR(os.lstat(out).st_mode) and _beside(tmp_path) == []


def test_force_replaces_a_dataset_or_an_empty_directory(tmp_path, tiny_dataset, make_tiny):
    data = make_tiny(seed=5)
    write_dataset(tiny_dataset, overwrite=True, **data)
    assert np.array_equal(open_dataset(tiny_dataset, verify=True).features(), data["features"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match="empty: already exists; choose another --out or pass --force"):
        write_dataset(empty, **data)
    write_dataset(empty, overwrite=True, **data)
    open_dataset(empty, verify=True)
    assert _beside(tmp_path) == []


def test_reshard_refuses_a_non_dataset_out_and_overlaps(tmp_path, tiny_dataset):
    other = tmp_path / "otherdir"
    other.mkdir()
    (other / "notes.txt").write_text("precious")
    with pytest.raises(DatasetError) as err:
        reshard_dataset(tiny_dataset, 3, out=other, overwrite=True)
    assert str(err.value) == f"{other}: " + NOT_A_DATASET.format("no manifest.json")
    assert sorted(os.listdir(other)) == ["notes.txt"]
    inside = tiny_dataset / "sub"
    with pytest.raises(DatasetError, match=f"{inside}: --out lies inside the input directory {tiny_dataset}"):
        reshard_dataset(tiny_dataset, 3, out=inside)
    with pytest.raises(DatasetError, match=f"{tmp_path}: --out is or holds the input {tiny_dataset}"):
        reshard_dataset(tiny_dataset, 3, out=tmp_path, overwrite=True)
    assert open_dataset(tiny_dataset, verify=True).manifest.num_shards == 2
    assert _beside(tmp_path) == [] and not inside.exists()


def test_reshard_in_place_through_a_symlink_keeps_the_link(tmp_path, tiny_dataset):
    link = tmp_path / "link"
    link.symlink_to(tiny_dataset)
    reshard_dataset(link, 3)
    assert link.is_symlink() and open_dataset(tiny_dataset, verify=True).manifest.num_shards == 3
    assert _beside(tmp_path) == []


def test_inputs_and_output_must_not_overlap(tmp_path):
    from saintpipe.services.dataset.output import check_output

    src = tmp_path / "src"
    src.mkdir()
    (src / "indptr.npy").write_bytes(b"")
    with pytest.raises(DatasetError, match=f"{src}: --out is or holds the input {src / 'indptr.npy'}"):
        check_output(src, overwrite=True, inputs=[src / "indptr.npy"])
    with pytest.raises(DatasetError, match=f"{src}: --out is or holds the input {src}"):
        check_output(src, overwrite=True, inputs=[src])
    with pytest.raises(DatasetError, match=f"{src / 'ds'}: --out lies inside the input directory {src}"):
        check_output(src / "ds", overwrite=False, inputs=[src])
    alias = tmp_path / "alias"
    alias.symlink_to(src)  # compared after resolving links
    with pytest.raises(DatasetError, match=f"{alias}: --out is or holds the input {src / 'indptr.npy'}"):
        check_output(alias, overwrite=True, inputs=[None, src / "indptr.npy"])
    with pytest.raises(DatasetError, match=f"{alias / 'ds'}: --out lies inside the input directory {src}"):
        check_output(alias / "ds", overwrite=False, inputs=[src])
    check_output(tmp_path / "ds", overwrite=False, inputs=[src / "indptr.npy", None])  # a sibling is fine


def test_an_out_that_cannot_be_created_is_one_line_naming_it(tmp_path, make_tiny):
    (tmp_path / "file").write_text("x")
    with pytest.raises(DatasetError) as err:
        write_dataset(tmp_path / "file" / "x", **make_tiny())
    assert str(err.value) == f"{tmp_path / 'file' / 'x'}: cannot create it: {tmp_path / 'file'} is a regular file, " \
                             "not a directory"
    with pytest.raises(DatasetError, match=r"^/dev/null/x: cannot create it: /dev/null is a character device"):
        write_dataset("/dev/null/x", **make_tiny())
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    with pytest.raises(DatasetError, match=r"^/proc/x: cannot write: .* \(creating a directory in /proc\)$"):
        write_dataset("/proc/x", **make_tiny())
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_a_parent_without_write_permission_is_refused_up_front(make_tiny):
    # Root may write anywhere: as root, the write runs in a child that has dropped to user nobody.
    base = Path(tempfile.mkdtemp(prefix="saintpipe-perm-"))
    try:
        base.chmod(0o755)
        locked = base / "locked"
        locked.mkdir(mode=0o555)
        arrays = make_tiny()

        def attempt() -> None:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            try:
                write_dataset(locked / "ds", **arrays)
            except DatasetError as exc:
                os._exit(0 if str(exc).endswith(f"cannot create it: no permission to write in {locked}") else 3)
            os._exit(4)

        assert run_in_child(attempt) == 0
        assert os.listdir(locked) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_write_error_names_out_and_leaves_nothing(tmp_path, tiny_dataset, make_tiny, monkeypatch):
    def no_space(directory, rel, array):
        raise OSError(28, "No space left on device", str(directory / rel))

    monkeypatch.setattr(store, "_save", no_space)
    with pytest.raises(DatasetError, match=r"tiny: cannot write: No space left on device$"):
        write_dataset(tiny_dataset, overwrite=True, **make_tiny(seed=2))
    open_dataset(tiny_dataset, verify=True)
    assert _beside(tmp_path) == []


def test_sigterm_during_the_write_leaves_nothing(tmp_path, make_tiny, monkeypatch):
    out = tmp_path / "ds"
    real_save = store._save

    def terminated_midway(directory, rel, array):
        if rel.startswith("features/"):
            os.kill(os.getpid(), signal.SIGTERM)
        real_save(directory, rel, array)

    monkeypatch.setattr(store, "_save", terminated_midway)

    def write() -> None:
        # As in a fresh `saintpipe` process: an earlier test of the session may have installed a SIGTERM handler.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        write_dataset(out, **make_tiny())

    assert run_in_child(write) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_a_killed_writers_temporary_directory_is_removed_by_the_next_write(tmp_path, make_tiny, monkeypatch,
                                                                           caplog):
    out = tmp_path / "ds"
    real_save = store._save

    def killed_midway(directory, rel, array):
        real_save(directory, rel, array)
        if rel.startswith("features/"):
            os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(store, "_save", killed_midway)
    assert run_in_child(lambda: write_dataset(out, **make_tiny())) == -signal.SIGKILL
    monkeypatch.setattr(store, "_save", real_save)
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(".ds" + atomic.TMP_INFIX) and (left / "features").is_dir()
    live = atomic.temp_sibling(out)  # a live writer's (this process): kept
    with caplog.at_level(logging.INFO, logger="saintpipe.core.atomic"):
        write_dataset(out, **make_tiny())
    assert not left.exists() and live.is_dir()
    assert f"removed {left}, left by a writer process that is gone (" in caplog.text
    open_dataset(out, verify=True)
