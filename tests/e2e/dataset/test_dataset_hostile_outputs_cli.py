"""``--out`` / ``--force`` through the real console script never destroy anything (issue 19, findings 2, 4, 6).

Each refusal is one line naming the path and what it is, before any import or
generation; killed and terminated writes leave nothing the next write does
not clean up.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.support.cli import ROOT, saintpipe_command

pytestmark = pytest.mark.timeout(240)

REFUSED = "exists and is not a saintpipe dataset ({}); --force only replaces a dataset: " \
          "choose another --out or remove it yourself"


def _one_error_line(r: subprocess.CompletedProcess, expected: str) -> None:
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"saintpipe: error: {expected}\n" and "Traceback" not in r.stderr
    assert "wrote" not in r.stdout


def _beside(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_force_keeps_a_user_directory(cli, tmp_path, real_datasets):
    out = tmp_path / "userdir"
    out.mkdir()
    (out / "notes.txt").write_text("precious\n")
    r = cli("data", "import", "npz", str(real_datasets / "cora.npz"), "--out", str(out), "--force", check=False)
    _one_error_line(r, f"{out}: " + REFUSED.format("no manifest.json"))
    assert (out / "notes.txt").read_text() == "precious\n" and os.listdir(out) == ["notes.txt"]
    assert _beside(tmp_path) == []


@pytest.mark.parametrize("kind", ["file", "symlink", "fifo", "device"])
def test_force_refuses_files_links_fifos_and_devices(cli, tmp_path, real_datasets, kind):
    out = tmp_path / "out"
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    why = {"file": "a regular file", "symlink": f"a symbolic link to {target}; links are not followed",
           "fifo": "a FIFO", "device": "a character device"}[kind]
    if kind == "file":
        out.write_text("precious")
    elif kind == "symlink":
        out.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(out)
    else:
        try:
            os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
        except PermissionError:
            pytest.skip("creating a device needs root (CAP_MKNOD)")
    before = os.lstat(out)
    # A timeout: an older saintpipe blocked forever opening the FIFO.
    r = cli("data", "generate", "demo", "--nodes", "500", "--out", str(out), "--force", check=False, timeout=60)
    _one_error_line(r, f"{out}: " + REFUSED.format(why))
    after = os.lstat(out)
    assert (after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev)
    assert os.listdir(target) == ["keep.txt"] and _beside(tmp_path) == []


def test_import_arrays_onto_its_own_source_keeps_the_arrays(cli, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    arrays = {"indptr": np.array([0, 1, 2]), "indices": np.array([1, 0], np.int32),
              "features": np.ones((2, 3), np.float32), "labels": np.array([0, 1]), "split": np.array([0, 1])}
    for name, array in arrays.items():
        np.save(src / f"{name}.npy", array)
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    r = cli("data", "import", "arrays", str(src), "--out", str(src), "--force", check=False)
    _one_error_line(r, f"{src}: --out is or holds the input {src}; writing there would destroy it: "
                       "choose another --out")
    r = cli("data", "import", "arrays", str(src), "--out", str(src / "ds"), check=False)
    _one_error_line(r, f"{src / 'ds'}: --out lies inside the input directory {src}: choose an --out outside it")
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before
    assert _beside(tmp_path) == []


def test_shard_into_a_non_dataset_directory_is_refused(cli, tmp_path):
    ds = tmp_path / "ds"
    cli("data", "generate", "demo", "--nodes", "500", "--out", str(ds))
    other = tmp_path / "otherdir"
    other.mkdir()
    (other / "notes.txt").write_text("precious")
    r = cli("data", "shard", str(ds), "--shards", "3", "--out", str(other), "--force", check=False)
    _one_error_line(r, f"{other}: " + REFUSED.format("no manifest.json"))
    assert os.listdir(other) == ["notes.txt"]
    r = cli("data", "shard", str(ds), "--shards", "3", "--out", str(tmp_path / "copy"))
    assert "3 feature shard(s)" in r.stdout
    r = cli("data", "shard", str(ds), "--shards", "2", "--out", str(tmp_path / "copy"), "--force")
    assert "2 feature shard(s)" in r.stdout  # a dataset is still replaced
    assert _beside(tmp_path) == []


@pytest.mark.parametrize("out, reason", [
    ("/proc/x", "cannot write: No such file or directory (creating a directory in /proc)"),
    ("/dev/null/x", "cannot create it: /dev/null is a character device, not a directory"),
])
def test_an_out_that_cannot_be_created_is_one_line(cli, real_datasets, out, reason):
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    r = cli("data", "import", "npz", str(real_datasets / "cora.npz"), "--out", out, check=False)
    _one_error_line(r, f"{out}: {reason}")


def _default_signals() -> None:
    """SIGINT and SIGTERM as in a user's terminal: a suite started in the background (nohup, `cmd &`) inherits
    SIGINT ignored, and so would the writer, which would then never see the Ctrl-C this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _writing(out: Path) -> subprocess.Popen:
    """Start a write of ~130 MB of features to ``out`` and return once its temporary directory holds files."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([*saintpipe_command(), "data", "generate", "kronecker", "--scale", "14", "--degree", "4",
                             "--feature-dim", "2048", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_default_signals)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        # The write phase lasts a fraction of a second: poll without sleeping.
        if any(p.name.startswith(f".{out.name}.saintpipe-tmp-") and os.path.isdir(p / "features")
               for p in out.parent.iterdir()):
            return proc
    proc.kill()
    out_, err = proc.communicate()
    pytest.fail(f"never saw the write phase (exit {proc.returncode}): {out_} {err}")


def test_sigkill_leaves_a_temporary_directory_that_the_next_write_removes(cli, tmp_path):
    out = tmp_path / "big"
    proc = _writing(out)
    proc.kill()
    proc.communicate()
    (left,) = list(tmp_path.iterdir())
    assert left.name.startswith(".big.saintpipe-tmp-") and not out.exists()
    r = cli("-v", "data", "generate", "demo", "--nodes", "500", "--out", str(out))
    assert f"removed {left}, left by a writer process that is gone (" in r.stderr
    assert "wrote" in r.stdout and os.listdir(tmp_path) == ["big"]


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_during_the_write_leave_nothing(tmp_path, signum, code):
    out = tmp_path / "big"
    # The write phase lasts a fraction of a second: on a loaded machine the writer may finish between the poll
    # that saw its temporary directory and the signal. Such an attempt (exit 0, a complete dataset) says nothing
    # about the signal; try again, a bounded number of times.
    for _ in range(5):
        proc = _writing(out)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            break
        assert (out / "manifest.json").is_file(), err
        shutil.rmtree(out)
    assert proc.returncode == code and "Traceback" not in err, err
    assert os.listdir(tmp_path) == []
