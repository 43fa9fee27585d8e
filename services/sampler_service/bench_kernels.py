"""``saintpipe bench sampler``: throughput of the four samplers on 1 core and on all cores, with baselines.

For each graph (Kronecker scale 18 and 20 with degree 16, and cora) and each
sampler with the paper's parameters (frontier m=1000 n=8000, random walk
r=3000 h=2, edge budget 4000, node budget 8000): subgraphs/s, nodes/s and
edges/s of the induced subgraphs, mean |V_s| and |E_s|, on one pinned core
and on one pinned worker per core, and the scaling ratio. In the same run, on
one core: a vectorized-numpy random-walk sampler with induction and the direct
Algorithm 2 (the tests' oracle), with the ratios of the kernels to them.
Kronecker graphs are generated once and cached as datasets under
``$SAINTPIPE_HOME/datasets/``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

log = logging.getLogger(__name__)

# The sampler kernels' own benchmark. It lives here, above the kernels package (saintpipe.services.sampler,
# pure arrays in and out), because it reads, generates and caches its graphs through the dataset store;
# ``bench samplers`` (bench.py, beside it) measures the service filling the pool against the same kernels.

CORA = Path(__file__).resolve().parents[2] / "tests" / "data" / "cora.npz"
KINDS = ("frontier", "random_walk", "edge", "node")
QUICK_SCALES, QUICK_SECONDS = "12", 0.25


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer, real, seed
    from saintpipe.core.report import add_json_flag

    parser = sub.add_parser("sampler", help="sampler throughput on 1 core and all cores, against baselines",
                            description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--scales", default=None,
                        help="comma-separated Kronecker scales, '' for none (default 18,20; --quick: 12)")
    parser.add_argument("--degree", type=real(0, 2**30, min_open=True), default=16.0,
                        help="Kronecker mean degree (default 16)")
    parser.add_argument("--no-cora", action="store_true", help="leave out cora")
    parser.add_argument("--samplers", default=",".join(KINDS), help="comma-separated sampler kinds")
    parser.add_argument("--seconds", type=real(0, 3600, min_open=True), default=None,
                        help="seconds per measurement (default 3; --quick: 0.25)")
    parser.add_argument("--processes", type=integer(1, 4096), default=None,
                        help="workers of the all-cores figures (default: one per available core)")
    parser.add_argument("--quick", action="store_true", help="a small, short run (scale 12, 0.25 s each)")
    parser.add_argument("--seed", type=seed(), default=0, help="graph and job seed")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _parse_list(text: str, what: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    from saintpipe.core.errors import InvalidArgument

    items = [t.strip() for t in text.split(",") if t.strip()]
    if allowed is not None:
        for item in items:
            if item not in allowed:
                raise InvalidArgument(f"--{what}: unknown value {item!r}; choose from {', '.join(allowed)}")
    return items


def _graphs(scales: list[int], degree: float, seed: int, cora: bool):
    """Yield (name, indptr, indices); Kronecker graphs come from (or go to) the dataset cache."""
    import numpy as np

    from saintpipe.core.errors import DatasetError
    from saintpipe.core.paths import home
    from saintpipe.services.dataset.store import open_dataset, write_dataset

    for scale in scales:
        path = home() / "datasets" / f"kronecker-s{scale}-d{degree:g}-seed{seed}"
        if not (path / "manifest.json").is_file():
            from saintpipe.services.dataset.kronecker import generate_kronecker

            log.warning("generating Kronecker graph scale %d degree %g into %s (once)", scale, degree, path)
            write_dataset(path, overwrite=True,
                          **generate_kronecker(scale, degree, seed=seed, feature_dim=8, progress=True))
        data = open_dataset(path)
        yield f"kronecker-s{scale}", data.indptr, data.indices
    if cora:
        if not CORA.is_file():
            raise DatasetError(f"{CORA}: cora test graph not found "
                               "(run from a source checkout or pass --no-cora)")
        with np.load(CORA) as npz:
            yield "cora", npz["indptr"], npz["indices"]


def _row(graph: str, sampler: str, cores: int, t) -> dict:
    return {"graph": graph, "sampler": sampler, "cores": cores, "subgraphs_per_s": t.subgraphs_per_s,
            "nodes_per_s": t.nodes_per_s, "edges_per_s": t.edges_per_s, "mean_nodes": t.mean_nodes,
            "mean_edges": t.mean_edges}


def _bench(args: argparse.Namespace) -> int:
    from saintpipe.core.report import emit_report
    from saintpipe.core.errors import InvalidArgument
    from saintpipe.services.sampler.config import parse_sampler_config
    from saintpipe.services.sampler.parallel import available_cores, measure_throughput
    from saintpipe.services.sampler.reference import DirectFrontierSampler, NumpyRandomWalkSampler
    from saintpipe.services.sampler.sampler import make_sampler

    scales_text = args.scales if args.scales is not None else (QUICK_SCALES if args.quick else "18,20")
    try:
        scales = [int(s) for s in _parse_list(scales_text, "scales")]
    except ValueError:
        raise InvalidArgument(f"--scales: expected comma-separated integers, got {scales_text!r}") from None
    seconds = args.seconds if args.seconds is not None else (QUICK_SECONDS if args.quick else 3.0)
    if seconds <= 0:
        raise InvalidArgument(f"--seconds must be > 0, got {seconds}")
    kinds = _parse_list(args.samplers, "samplers", KINDS)
    processes = args.processes or len(available_cores())
    if processes < 1:
        raise InvalidArgument(f"--processes must be >= 1, got {processes}")
    configs = {kind: parse_sampler_config({"kind": kind}) for kind in kinds}

    rows: list[dict] = []
    summary: dict[str, float] = {}
    for graph, indptr, indices in _graphs(scales, args.degree, args.seed, not args.no_cora):
        single: dict[str, float] = {}
        for kind, config in configs.items():
            sampler = make_sampler(config, indptr, indices)
            one = measure_throughput(sampler, seconds=seconds, processes=1, job_seed=args.seed)
            rows.append(_row(graph, kind, 1, one))
            single[kind] = one.subgraphs_per_s
            if processes > 1:
                many = measure_throughput(sampler, seconds=seconds, processes=processes, job_seed=args.seed)
                row = _row(graph, kind, processes, many)
                row["scaling"] = many.subgraphs_per_s / one.subgraphs_per_s
                rows.append(row)
                summary[f"{graph} {kind}: scaling / cores"] = row["scaling"] / processes
            log.info("%s %s done", graph, kind)
        if "random_walk" in configs:
            cfg = configs["random_walk"]
            base = measure_throughput(NumpyRandomWalkSampler(indptr, indices, cfg.roots, cfg.walk_length),
                                      seconds=seconds, processes=1, job_seed=args.seed)
            rows.append(_row(graph, "baseline: numpy random walk", 1, base))
            summary[f"{graph} random_walk / numpy baseline (1 core)"] = (
                single["random_walk"] / base.subgraphs_per_s)
        if "frontier" in configs:
            cfg = configs["frontier"]
            direct = DirectFrontierSampler(indptr, indices, cfg.frontier_size, cfg.node_budget)
            base = measure_throughput(direct, seconds=seconds, processes=1, job_seed=args.seed)
            rows.append(_row(graph, "baseline: direct Algorithm 2", 1, base))
            summary[f"{graph} frontier dashboard / direct Algorithm 2 (1 core)"] = (
                single["frontier"] / base.subgraphs_per_s)
    params = {"scales": scales_text, "degree": args.degree, "seconds": seconds, "processes": processes,
              "samplers": ",".join(kinds), "targets": "random_walk/numpy >= 5, frontier/direct >= 5, "
                                                     "scaling/cores >= 0.85"}
    columns = ["graph", "sampler", "cores", "subgraphs_per_s", "nodes_per_s", "edges_per_s", "mean_nodes",
               "mean_edges", "scaling"]
    emit_report("sampler", rows, params=params, summary=summary, as_json=args.json, columns=columns)
    return 0
