"""``saintpipe data generate demo --keep-existing``: a deployment's data step, run on every start.

The first run writes the dataset; later runs find it, check that it opens and
leave it as it is; a directory that is not a dataset (or a broken one) is an
error naming the path, never silently replaced; --force contradicts it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from saintpipe.cli import main

NODES = "600"
OLD = 1_000_000_000  # 2001: any rewrite would give the files the current time


def generate(out: Path, *flags: str) -> int:
    return main(["data", "generate", "demo", "--nodes", NODES, "--out", str(out), "--shards", "2", *flags])


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``: (mtime in ns, size)."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(root.rglob("*")) if p.is_file()}


def age(root: Path) -> None:
    for p in root.rglob("*"):
        os.utime(p, (OLD, OLD))


@pytest.fixture
def dataset(tmp_path, capsys) -> Path:
    out = tmp_path / "demo"
    assert generate(out, "--keep-existing") == 0
    assert f"wrote {out}: 600 nodes" in capsys.readouterr().out
    age(out)
    return out


def test_first_run_writes_later_runs_keep(dataset, tmp_path, capsys):
    before = snapshot(dataset)
    assert "manifest.json" in before and before["manifest.json"][0] == OLD * 10**9
    for _ in range(2):
        assert generate(dataset, "--keep-existing") == 0
        out = capsys.readouterr().out
        assert out.startswith(f"kept {dataset}: 600 nodes") and "2 feature shard(s)" in out and "wrote" not in out
        assert snapshot(dataset) == before, "--keep-existing must leave the dataset untouched"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"], "no temporary directory left beside it"


def test_kept_whatever_the_generation_flags(dataset, capsys):
    # The dataset found is the one kept: other sizes or seeds do not regenerate it.
    before = snapshot(dataset)
    assert main(["data", "generate", "demo", "--nodes", "900", "--seed", "3", "--out", str(dataset),
                 "--keep-existing"]) == 0
    assert capsys.readouterr().out.startswith(f"kept {dataset}: 600 nodes")
    assert snapshot(dataset) == before


@pytest.mark.parametrize("content", [{}, {"notes.txt": "mine"}])
def test_a_directory_that_is_not_a_dataset_is_an_error_naming_it(tmp_path, capsys, content):
    out = tmp_path / "not-a-dataset"
    out.mkdir()
    for name, text in content.items():
        (out / name).write_text(text)
    age(out)
    before = snapshot(out)
    assert generate(out, "--keep-existing") != 0
    captured = capsys.readouterr()
    assert captured.err.startswith("saintpipe: error: ") and str(out) in captured.err
    assert "Traceback" not in captured.err and "kept" not in captured.out and "wrote" not in captured.out
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == sorted(content)


def test_a_broken_dataset_is_an_error_not_kept_nor_replaced(dataset, capsys):
    (dataset / "labels.npy").unlink()
    before = snapshot(dataset)
    assert generate(dataset, "--keep-existing") != 0
    err = capsys.readouterr().err
    assert str(dataset / "labels.npy") in err
    assert snapshot(dataset) == before


def test_keep_existing_and_force_are_refused_together(dataset, capsys):
    before = snapshot(dataset)
    assert generate(dataset, "--keep-existing", "--force") != 0
    err = capsys.readouterr().err
    assert "--keep-existing" in err and "--force" in err
    assert snapshot(dataset) == before


def test_without_keep_existing_an_existing_dataset_still_needs_force(dataset, capsys):
    before = snapshot(dataset)
    assert generate(dataset) == 2
    assert "pass --force" in capsys.readouterr().err
    assert snapshot(dataset) == before
    assert generate(dataset, "--force") == 0
    assert snapshot(dataset)["manifest.json"][0] != OLD * 10**9
