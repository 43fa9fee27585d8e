"""Available memory (host and cgroup limits) and refusing work that would need more."""

from __future__ import annotations

from pathlib import Path

import pytest

from saintpipe.core import memory
from saintpipe.core.errors import DatasetError, InvalidArgument
from saintpipe.core.memory import cgroup_headroom, format_bytes, require_memory

GIB = 1 << 30


@pytest.fixture
def available(monkeypatch):
    """Set what ``available_memory`` reports: ``available(nbytes)``."""
    def set_to(nbytes: int) -> None:
        monkeypatch.setattr(memory, "available_memory", lambda: nbytes)
    return set_to


def test_refusal_says_what_is_needed_and_what_is_available(available):
    available(int(21.3 * GIB))
    with pytest.raises(InvalidArgument) as err:
        require_memory(10**11 * 8, "demo dataset of 100,000,000,000 nodes", hint="use fewer --nodes")
    assert str(err.value) == ("demo dataset of 100,000,000,000 nodes needs about 745.1 GiB of memory; "
                              "21.3 GiB is available (use fewer --nodes)")


def test_what_fits_passes_and_the_error_class_is_the_callers(available):
    available(GIB)
    require_memory(GIB, "exactly what is available")
    available(GIB - 1024 * 1024)
    with pytest.raises(DatasetError, match=r"^x.npy: a big array needs about 1.0 GiB of memory; 1023.0 MiB is available$"):
        require_memory(GIB, "x.npy: a big array", error=DatasetError)


@pytest.mark.parametrize("nbytes, text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"),
                                          (10**11 * 8, "745.1 GiB"), (4 * 10**17, "355.3 PiB")])
def test_format_bytes(nbytes, text):
    assert format_bytes(nbytes) == text


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_limit_of_an_ancestor_counts_reclaimable_cache(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("0::/pod/ctr\n")
    root = tmp_path / "fs"
    _write(root, "pod/ctr/memory.max", "max\n")  # the container itself: no limit
    _write(root, "pod/memory.max", "1000\n")  # the pod: 1000 bytes, 400 used, 100 of it droppable cache
    _write(root, "pod/memory.current", "400\n")
    _write(root, "pod/memory.stat", "anon 300\ninactive_file 100\n")
    assert cgroup_headroom(proc, root) == 700


def test_cgroup_v1_unlimited_and_no_cgroup_at_all(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("5:devices:/x\n4:memory:/x\n")
    root = tmp_path / "fs"
    _write(root, "memory/x/memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    assert cgroup_headroom(proc, root) is None
    _write(root, "memory/x/memory.limit_in_bytes", f"{2 * GIB}\n")
    _write(root, "memory/x/memory.usage_in_bytes", f"{GIB}\n")
    _write(root, "memory/x/memory.stat", "total_inactive_file 0\n")
    assert cgroup_headroom(proc, root) == GIB
    assert cgroup_headroom(tmp_path / "missing", root) is None


def test_available_memory_is_the_lower_of_host_and_cgroup(monkeypatch):
    host = memory.psutil.virtual_memory().available
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: 12345)
    assert memory.available_memory() == min(host, 12345)
    monkeypatch.setattr(memory, "cgroup_headroom", lambda: None)
    assert memory.available_memory() > 12345
