"""``saintpipe doctor``: list saintpipe's files in shared memory and remove those that dead processes left.

A run killed with SIGKILL leaves its pool slots, feature regions and shared online-normalization state in
``/dev/shm``, holding memory until reboot. Each file's name states the process that made it; this command
shows whether that process still runs and, with ``--clean``, removes the files of processes that are gone
(never a live process's, nor one of another PID namespace). The next producer or feature client to start
removes them as well; this is for looking, and for a machine where none starts again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from saintpipe.core.shm_owners import SHM_DIR


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser(
        "doctor",
        help="list saintpipe's files in /dev/shm; --clean removes those of dead processes",
        description="List saintpipe's shared-memory files (pool slots, feature regions, online normalization "
        "state) with their size and owner process, alive or dead. With --clean, remove those whose owner is dead: never a live "
        "process's file, nor one of another PID namespace (a container sharing /dev/shm), nor the pool's "
        "namespace marker. A dead producer's slots stay while another producer of their job runs (Redis "
        "entries may still name them). Exits 0.",
    )
    parser.add_argument("--clean", action="store_true", help="remove the files of dead owner processes")
    parser.add_argument("--shm-dir", type=Path, default=SHM_DIR,
                        help="shared-memory directory to look in (default /dev/shm)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(func=_doctor)


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if nbytes < 1024:
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"


def _state(f) -> str:
    from saintpipe.core import shm_owners

    if f.leftover:
        return "dead: leftover"
    if f.status == shm_owners.DEAD:
        return "dead: its job runs, kept"
    return f.status


def _doctor(args: argparse.Namespace) -> int:
    from saintpipe.core import shm_owners

    files = shm_owners.scan(args.shm_dir, shm_owners.KINDS)  # the registry: every kind of every component
    leftovers = [f for f in files if f.leftover]
    removed = shm_owners.remove(leftovers) if args.clean else []
    unknown = [f for f in files if f.status == shm_owners.UNKNOWN]
    if args.json:
        gone = {f.name for f in removed}
        print(json.dumps({
            "shm_dir": str(args.shm_dir),
            "files": [{
                "kind": f.kind, "name": f.name, "size": f.size,
                "owner_pid": f.owner.pid if f.owner else None,
                "owner_pid_namespace": f.owner.namespace if f.owner else None,
                "owner": f.status, "leftover": f.leftover, "removed": f.name in gone,
            } for f in files],
            "leftovers": len(leftovers),
            "leftover_bytes": sum(f.size for f in leftovers),
            "removed": sorted(gone),
            "freed_bytes": sum(f.size for f in removed),
        }, indent=2))
        return 0
    if not files:
        print(f"no saintpipe files in {args.shm_dir}")
        return 0
    rows = [("KIND", "SIZE", "PID", "OWNER", "NAME")] + [
        (f.kind, _size(f.size), str(f.owner.pid) if f.owner else "-", _state(f), f.name) for f in files
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.rjust(w) if i == 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
              + "  " + r[4])
    print(f"\n{len(files)} file(s), {_size(sum(f.size for f in files))}, in {args.shm_dir}; "
          f"{len(leftovers)} left by dead processes ({_size(sum(f.size for f in leftovers))})")
    if args.clean:
        for f in removed:
            print(f"removed {f.path} ({_size(f.size)})")
        print(f"freed {sum(f.size for f in removed)} bytes ({_size(sum(f.size for f in removed))}) "
              f"in {len(removed)} file(s)")
        if len(removed) < len(leftovers):
            print(f"{len(leftovers) - len(removed)} leftover(s) could not be removed (another user's, "
                  "or already gone)")
    elif leftovers:
        print("run `saintpipe doctor --clean` to remove them")
    if unknown:
        print(f"{len(unknown)} file(s) state no owner that can be checked (written before names stated "
              "their owner, or by hand): never removed here; delete them with rm once no saintpipe run "
              f"uses {args.shm_dir}")
    return 0
