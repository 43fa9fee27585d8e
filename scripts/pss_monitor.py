#!/usr/bin/env python3
"""Peak memory of a process tree as PSS, per process, while it runs (the memory columns of
docs/benchmarks/scale.md).

PSS (proportional set size, from /proc/PID/smaps_rollup) counts a shared page once across the processes that
map it, split between them: the memory-mapped CSR and feature files that every sampler worker, shard and
trainer maps are not counted once per process, as RSS would count them.

    python scripts/pss_monitor.py --pid $(pgrep -f 'saintpipe run') --interval 2 --out pss.json

Samples every ``--interval`` seconds until the root process exits, then prints one line per process (its
label, peak PSS, RSS, USS and anonymous memory) and the peak of their sum, and writes the same as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

LABELS = [  # first match wins: what a process of the pipeline is, from its command line
    (re.compile(r"ray::_SamplerWorkerActor"), "sampler worker"),
    (re.compile(r"ray::TrainerActor"), "trainer"),
    (re.compile(r"--shard (\d+)"), "feature shard {0}"),
    (re.compile(r"redis-server"), "redis"),
    (re.compile(r"saintpipe(?:\s+-\S+)*\s+run\b"), "saintpipe run (driver)"),
    (re.compile(r"raylet|gcs_server|dashboard|log_monitor|runtime_env|ray/_private"), "ray (system)"),
]


# Labels a process may still grow out of: a Ray worker starts as ``.../ray/_private/workers/default_worker.py``
# ("ray (system)" by its command line), then is "ray::IDLE", and takes its actor's name only once it holds one.
_PROVISIONAL = {"ray::IDLE", "ray (system)"}


def label(cmdline: str) -> str:
    for pattern, name in LABELS:
        m = pattern.search(cmdline)
        if m:
            return name.format(*m.groups())
    return cmdline.split(" ", 1)[0].rsplit("/", 1)[-1] or "?"


def rollup(pid: int) -> tuple[int, int, int, int]:
    """(PSS, RSS, USS, anonymous) in bytes, zeros if the process is gone or unreadable.

    USS counts the pages this process alone maps. Of a file that several processes map (the CSR, the
    oriented lists), the pages only this one has touched so far are in its USS too, although they stay
    in the page cache without it; its anonymous memory (heap, arrays, interpreter) is what exists only
    because of it, so that is what one more such process adds.
    """
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0, 0, 0
    fields = {k: int(v) * 1024 for k, v in re.findall(r"^(\w+):\s+(\d+) kB", text, re.M)}
    return (fields.get("Pss", 0), fields.get("Rss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0),
            fields.get("Anonymous", 0))


def children(root: int) -> list[int]:
    """``root`` and its descendants, from /proc (no psutil: the script runs with any python3)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parent.items() if ppid in frontier]
        tree += frontier
    return tree


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, required=True, help="root of the process tree")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between samples (default 2)")
    parser.add_argument("--out", type=Path, help="write the peaks here as JSON")
    args = parser.parse_args(argv)
    peaks: dict[int, dict] = {}
    total_peak, at_peak, began = 0, {}, time.monotonic()
    while Path(f"/proc/{args.pid}").exists():
        total, now = 0, {}
        for pid in children(args.pid):
            pss, rss, uss, anon = rollup(pid)
            if not pss:
                continue
            total += pss
            now[pid] = pss
            row = peaks.setdefault(pid, {"pid": pid, "label": "ray::IDLE", "pss": 0, "rss": 0, "uss": 0,
                                            "anon": 0})
            if row["label"] in _PROVISIONAL:  # a Ray worker is named after its actor only once it holds one
                row["label"] = label(cmdline(pid))
            row["pss"], row["rss"], row["uss"] = max(row["pss"], pss), max(row["rss"], rss), max(row["uss"], uss)
            row["anon"] = max(row["anon"], anon)
        if total > total_peak:  # what each process held when the sum peaked (peaks per process need not meet)
            total_peak, at_peak = total, {"seconds": round(time.monotonic() - began, 1), "pss": now}
        time.sleep(args.interval)
    rows = sorted(peaks.values(), key=lambda r: -r["pss"])
    for r in rows:
        if r["pss"] >= 20 << 20:  # the rest are small helpers
            print(f"{r['label']:<28} pid {r['pid']:>7}  peak PSS {r['pss'] / 2**30:6.2f} GiB  "
                  f"peak RSS {r['rss'] / 2**30:6.2f} GiB  peak USS {r['uss'] / 2**30:6.2f} GiB  "
                  f"peak anonymous {r['anon'] / 2**30:6.2f} GiB")
    print(f"{'sum of PSS (peak)':<28} {'':>11}  {total_peak / 2**30:15.2f} GiB")
    if at_peak:
        held = sorted(((peaks[pid]["label"], pss) for pid, pss in at_peak["pss"].items()), key=lambda r: -r[1])
        print(f"  at {at_peak['seconds']} s: " + ", ".join(f"{name} {pss / 2**30:.2f}" for name, pss in held
                                                         if pss >= 100 << 20) + " GiB")
    if args.out:
        args.out.write_text(json.dumps({"processes": rows, "total_pss_peak": total_peak,
                                        "at_total_peak": {"seconds": at_peak.get("seconds"),
                                                          "pss": {str(k): v for k, v in at_peak.get("pss", {}).items()}}},
                                       indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
