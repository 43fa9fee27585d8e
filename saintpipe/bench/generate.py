"""``saintpipe bench generate``: time and peak memory of the Kronecker generator.

The generator runs in a fresh Python process so that its peak memory is its own, not the CLI's: the child
reports the peak of traced allocations (``tracemalloc``, which numpy's array buffers report to) and its
maximum resident set size, next to its resident size before generating.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

MB = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer, real, seed
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser("generate", help="time the Kronecker generator",
                            description="Time and peak memory of `data generate kronecker`, measured in a "
                            "fresh process: generation time, peak memory, N, E, mean degree, CSR bytes.")
    parser.add_argument("--scale", type=integer(1, 30), default=20, help="2^SCALE nodes, SCALE 1 to 30 (default 20)")
    parser.add_argument("--degree", type=real(0, 2**30, min_open=True), default=16, help="mean degree (default 16)")
    parser.add_argument("--seed", type=seed(), default=0)
    parser.add_argument("--feature-dim", type=integer(1, 2**20), default=50)
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def measure(scale: int, degree: float, seed: int = 0, feature_dim: int = 50) -> dict[str, float | int]:
    """Run the generator in a child process and return its figures."""
    spec = json.dumps({"scale": scale, "degree": degree, "seed": seed, "feature_dim": feature_dim})
    return child_figures(__name__, [spec], "the generator process")


def child_figures(module: str, args: list[str], what: str, stderr_tail: int = 500) -> dict:
    """Run ``python -m module args`` in a fresh process (its peak memory its own) and return the JSON object
    its last line prints.

    Raises:
        SaintpipeError: the process failed; the message ends with its stderr's tail.
    """
    from saintpipe.core.errors import SaintpipeError

    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SaintpipeError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-stderr_tail:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _child(spec: dict) -> dict[str, float | int]:
    """In the child: generate once and report time and memory."""
    import resource
    import time
    import tracemalloc

    import numpy as np

    from saintpipe.services.dataset.kronecker import generate_kronecker

    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    t0 = time.perf_counter()
    data = generate_kronecker(spec["scale"], spec["degree"], seed=spec["seed"], feature_dim=spec["feature_dim"])
    seconds = time.perf_counter() - t0
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    indptr, indices = data["indptr"], data["indices"]
    deg = np.diff(indptr)
    csr = indptr.nbytes + indices.nbytes
    output = csr + data["features"].nbytes + data["labels"].nbytes + sum(s.nbytes for s in data["splits"].values())
    n = int(indptr.size - 1)
    return {
        "seconds": seconds,
        "nodes": n,
        "edges_directed": int(indices.size),
        "mean_degree": float(indices.size / n),
        "max_degree": int(deg.max()),
        "isolated_nodes": int((deg == 0).sum()),
        "csr_mb": csr / MB,
        "output_mb": output / MB,
        "peak_traced_mb": traced_peak / MB,
        "peak_rss_mb": peak_rss / MB,
        "rss_before_mb": base_rss / MB,
        "peak_over_csr": traced_peak / csr,
        "peak_over_output": traced_peak / output,
    }


def _bench(args: argparse.Namespace) -> int:
    from saintpipe.core.report import emit_report

    figures = measure(args.scale, args.degree, args.seed, args.feature_dim)
    emit_report(
        "generate",
        [figures],
        params={"scale": args.scale, "degree": args.degree, "seed": args.seed, "feature_dim": args.feature_dim},
        summary={"time (s)": figures["seconds"], "peak memory (MB, traced)": figures["peak_traced_mb"],
                 "peak / CSR": figures["peak_over_csr"], "peak / whole output": figures["peak_over_output"]},
        as_json=args.json,
        columns=["seconds", "nodes", "edges_directed", "mean_degree", "max_degree", "csr_mb", "output_mb",
                 "peak_traced_mb", "peak_rss_mb", "peak_over_csr", "peak_over_output"],
    )
    return 0


if __name__ == "__main__":
    print(json.dumps(_child(json.loads(sys.argv[1]))))
