#!/usr/bin/env python3
"""The scale table of docs/benchmarks/scale.md: each step of the pipeline on Kronecker graphs of growing
scale.

For every scale: generation (seconds, peak RSS, bytes written), verify, text import (an edge list written
once, imported as ``saintpipe data import edgelist`` does, against pyarrow's CSV reader alone on the same file
in the same run: :mod:`saintpipe.bench.dataset_import`), and a ``saintpipe run`` with ``[run] max_seconds``
(start-up, trained and sampled subgraphs/s, the trainer's wait fraction, full-graph evaluation, peak PSS per
process from scripts/pss_monitor.py). Steps run one after another, so their timings do not share the machine.

    .venv/bin/python scripts/scale_table.py --scales 18,20,22 --workdir /data/scale --max-seconds 120

Prints one markdown table and, as its last line, the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAINTPIPE = [sys.executable, "-m", "saintpipe"]


def timed(argv: list[str], **kw) -> tuple[float, float, str]:
    """(seconds, peak RSS in GB, stdout) of a command under /usr/bin/time -v."""
    t0 = time.monotonic()
    proc = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, **kw)
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return seconds, int(rss.group(1)) / 1e6 if rss else float("nan"), proc.stdout


def size_gb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e9


def run_pipeline(dataset: Path, workdir: Path, max_seconds: float, workers: int) -> dict:
    config = workdir / "run.toml"
    config.write_text(f"[run]\nmax_seconds = {max_seconds}\nprogress = false\n[samplers]\nworkers = {workers}\n"
                      "[trainer.model]\nhidden = [64, 64]\n")
    out, pss = workdir / "run.out", workdir / "pss.json"
    proc = subprocess.Popen([*SAINTPIPE, "run", "--data", str(dataset), "--config", str(config), "--json",
                             "--run-dir", str(workdir / "run")], stdout=out.open("w"), stderr=subprocess.DEVNULL)
    monitor = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "pss_monitor.py"), "--pid", str(proc.pid),
                                "--interval", "2", "--out", str(pss)], stdout=subprocess.DEVNULL)
    if proc.wait() != 0:
        raise SystemExit(f"saintpipe run on {dataset} failed: see {out}")
    monitor.wait()
    summary = json.loads(out.read_text().strip().splitlines()[-1])
    peaks = json.loads(pss.read_text())
    by_label: dict[str, float] = {}
    for p in peaks["processes"]:
        label = "feature shard" if p["label"].startswith("feature shard") else p["label"]
        by_label[label] = max(by_label.get(label, 0.0), p["pss"] / 1e9)
    t = summary["times"]
    trainer_time = t["compute"] + t["data_wait"] + t["evaluation"]
    return {"startup_s": t["startup"], "trained_per_s": summary["training_throughput"],
            "sampled_per_s": summary["sampler_throughput"],
            "wait_fraction": t["data_wait"] / trainer_time if trainer_time else float("nan"),
            "evaluation_s": summary["evaluation_estimate_s"], "final_evaluation_s": summary["final_evaluation_s"],
            "wall_s": t["wall"], "evaluation": summary["evaluation"],
            "pss_gb": {k: round(v, 2) for k, v in by_label.items() if v >= 0.05},
            # What one more sampler worker adds: its private pages (the shared ones only move between PSSs).
            "sampler_worker_uss_gb": max((p["uss"] for p in peaks["processes"] if p["label"] == "sampler worker"),
                                         default=0) / 1e9,
            "pss_total_gb": peaks["total_pss_peak"] / 1e9}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="18,20,22", help="comma-separated Kronecker scales (default 18,20,22)")
    parser.add_argument("--workdir", type=Path, required=True, help="where the datasets and files go")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="[run] max_seconds of each run")
    parser.add_argument("--workers", type=int, default=2, help="sampler workers of each run (default 2)")
    parser.add_argument("--import-up-to", type=int, default=22, help="text import only up to this scale")
    args = parser.parse_args(argv)
    rows = []
    for scale in [int(s) for s in args.scales.split(",")]:
        work = args.workdir / f"s{scale}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        data = work / "data"
        row: dict = {"scale": scale}
        row["gen_s"], row["gen_peak_gb"], _ = timed([*SAINTPIPE, "data", "generate", "kronecker", "--scale",
                                                     str(scale), "--degree", "16", "--shards", "2", "--out", str(data)])
        row["bytes_gb"] = size_gb(data)
        row["verify_s"], row["verify_peak_gb"], _ = timed([*SAINTPIPE, "data", "verify", str(data)])
        if scale <= args.import_up_to:
            from saintpipe.bench.dataset_import import measure, write_edge_list
            from saintpipe.services.dataset.store import open_dataset

            text = work / "edges.txt"
            opened = open_dataset(data)
            write_edge_list(opened.indptr, opened.indices, text)
            del opened
            figures = measure(text, work / "imported")
            row.update({f"import_{k}": v for k, v in figures.items()})
            text.unlink()
            shutil.rmtree(work / "imported")
        row.update(run_pipeline(data, work, args.max_seconds, args.workers))
        rows.append(row)
        print(json.dumps(row), flush=True, file=sys.stderr)
    print("| scale | gen s (peak GB / written GB) | verify s | text import s (peak GB) / its read s / pyarrow.csv s | start-up s "
          "| trained/s (sampled/s) | wait | evaluation s | PSS GB (total) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        text = (f"{r['import_import_s']:.1f} ({r['import_peak_rss_gb']:.2f}) / {r['import_read_s']:.1f} / "
                f"{r['import_reader_s']:.1f}" if "import_import_s" in r else "not measured")
        pss = ", ".join(f"{k} {v}" for k, v in r["pss_gb"].items())
        print(f"| {r['scale']} | {r['gen_s']:.1f} ({r['gen_peak_gb']:.2f} / {r['bytes_gb']:.2f}) | {r['verify_s']:.1f} "
              f"| {text} | {r['startup_s']:.1f} | {r['trained_per_s']:.1f} ({r['sampled_per_s']:.1f}) "
              f"| {100 * r['wait_fraction']:.0f}% | {r['evaluation_s']:.1f} | {pss} ({r['pss_total_gb']:.1f}) |")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
