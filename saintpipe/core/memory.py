"""How much memory this process may still allocate, and refusing work that would need more.

Sizes that come from outside (a ``--nodes`` flag, the shape an ``.npy`` header declares) decide how much numpy
allocates. Checking them against the available memory first turns "tried to allocate 745 GiB" (a MemoryError
traceback, or the OOM killer) into one line that says what would be needed.

Available memory is the smaller of the host's available memory (free plus reclaimable, as ``psutil`` reports
it) and the headroom under the memory limit of this process's cgroup and its ancestors (cgroup v2
``memory.max``, or v1 ``memory.limit_in_bytes``): in a container the host may have plenty while the
container's limit is near.
"""

from __future__ import annotations

import re
from pathlib import Path

import psutil

from saintpipe.core.errors import InvalidArgument, SaintpipeError

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
# cgroup v1 reports "no limit" as a huge page-aligned number rather than "max".
_NO_LIMIT = 1 << 60


def format_bytes(nbytes: int) -> str:
    """``nbytes`` in binary units with one decimal: ``745.1 GiB``."""
    value = float(nbytes)
    for unit in _UNITS[:-1]:
        if abs(value) < 1024:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} {_UNITS[-1]}"


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _reclaimable(directory: Path, key: str) -> int:
    """Page cache the kernel can drop before it would hit the limit (``inactive_file`` of ``memory.stat``)."""
    try:
        for line in (directory / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _headroom(directory: Path, v2: bool) -> int | None:
    """Bytes left under one cgroup's limit; None without a (readable) limit."""
    limit = _read_int(directory / ("memory.max" if v2 else "memory.limit_in_bytes"))
    if limit is None or limit >= _NO_LIMIT:
        return None
    usage = _read_int(directory / ("memory.current" if v2 else "memory.usage_in_bytes")) or 0
    spare = _reclaimable(directory, "inactive_file" if v2 else "total_inactive_file")
    return max(0, limit - usage + spare)


def cgroup_headroom(proc_cgroup: Path = Path("/proc/self/cgroup"),
                    root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The least headroom under the memory limits of this process's cgroup and its ancestors; None if unlimited.

    Reads cgroup v2 (the ``0::PATH`` line, files under ``root``) or v1 (the
    ``memory`` controller line, files under ``root/memory``).
    """
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    found: list[int] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, rel = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            base, v2 = root, True
        elif "memory" in controllers.split(","):
            base, v2 = root / "memory", False
        else:
            continue
        directory = base / rel.lstrip("/")
        # A limit may sit on any ancestor (a pod's limit above its container's cgroup).
        while True:
            if (room := _headroom(directory, v2)) is not None:
                found.append(room)
            if directory == base or base not in directory.parents:
                break
            directory = directory.parent
    return min(found) if found else None


def available_memory() -> int:
    """Bytes this process can still allocate without swapping or hitting its cgroup limit (approximate)."""
    host = int(psutil.virtual_memory().available)
    room = cgroup_headroom()
    return host if room is None else min(host, room)


def require_memory(nbytes: int, what: str, *, hint: str = "",
                   error: type[SaintpipeError] = InvalidArgument) -> None:
    """Refuse work that needs about ``nbytes`` of memory when less is available.

    Args:
        nbytes: the estimated peak allocation.
        what: the work, as the start of the message (``demo dataset of 100,000,000,000 nodes``).
        hint: how to need less, shown in parentheses (``use fewer --nodes``).
        error: the exception to raise (InvalidArgument for flags, DatasetError for input files).

    Raises:
        error: ``"{what} needs about 745.1 GiB of memory; 21.3 GiB is available ({hint})"``.

    Example:
        >>> require_memory(1024, "a tiny array")  # fits: returns None
    """
    available = available_memory()
    if nbytes > available:
        note = f" ({hint})" if hint else ""
        raise error(f"{what} needs about {format_bytes(nbytes)} of memory; {format_bytes(available)} is available{note}")


def process_memory(pid: int) -> dict[str, int]:
    """A process's memory in bytes from ``/proc/PID/smaps_rollup``: ``pss`` (shared pages split between the
    processes that map them), ``rss``, ``anonymous`` (heap, arrays, the interpreter: what exists only because
    of the process); zeros when it is gone or unreadable."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {"pss": 0, "rss": 0, "anonymous": 0}
    fields = {k: int(v) * 1024 for k, v in re.findall(r"^(\w+):\s+(\d+) kB", text, re.MULTILINE)}
    return {"pss": fields.get("Pss", 0), "rss": fields.get("Rss", 0), "anonymous": fields.get("Anonymous", 0)}
