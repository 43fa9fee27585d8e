"""``saintpipe bench kernels``: throughput of the four sampler kernels on 1 core and all cores, with baselines.

Per graph (Kronecker scales and cora) and sampler (the paper's parameters): subgraphs/s, nodes/s and edges/s
on one pinned core and on one pinned worker per core, against a vectorized-numpy random walk and the direct
Algorithm 2, all measurements taking turns round by round; with two or more Kronecker scales, how the cost of
one subgraph grows with the graph. The method and the summary keys: docs/benchmarks/kernels.md.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from saintpipe.core.rounds import RoundsResult, Summary
    from saintpipe.services.sampler.config import FrontierConfig, RandomWalkConfig

log = logging.getLogger(__name__)

# The sampler kernels' own benchmark, above the kernels package (saintpipe.services.sampler, pure arrays in
# and out): it reads, generates and caches its graphs through the dataset store. ``bench sampler-service``
# (sampler_service.py, beside it) measures the service filling the pool against the same kernels.

CORA = Path(__file__).resolve().parents[2] / "tests" / "data" / "cora.npz"
KINDS = ("frontier", "random_walk", "edge", "node")
NUMPY, DIRECT = "baseline: numpy random walk", "baseline: direct Algorithm 2"
QUICK_SCALES, QUICK_SECONDS, QUICK_ROUNDS = "12", 0.1, 2
SECONDS, ROUNDS = 0.75, 3  # with the warm-up round, 3 s per measured configuration, as before rounds


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer, real, seed
    from saintpipe.core.report import add_json_flag

    # "sampler": the name it had before, kept for the scripts that use it.
    parser = sub.add_parser("kernels", aliases=["sampler"],
                            help="throughput of the sampler kernels on 1 core and all cores, against baselines",
                            description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--scales", default=None,
                        help="comma-separated Kronecker scales, '' for none (default 18,20; --quick: 12)")
    parser.add_argument("--degree", type=real(0, 2**30, min_open=True), default=16.0,
                        help="Kronecker mean degree (default 16)")
    parser.add_argument("--no-cora", action="store_true", help="leave out cora")
    parser.add_argument("--samplers", default=",".join(KINDS), help="comma-separated sampler kinds")
    parser.add_argument("--seconds", type=real(0, 3600, min_open=True), default=None,
                        help=f"seconds per measurement, i.e. per configuration and round "
                        f"(default {SECONDS}; --quick: {QUICK_SECONDS})")
    parser.add_argument("--rounds", type=integer(1, 10_000), default=None,
                        help=f"measured rounds, after one discarded warm-up round (default {ROUNDS}; "
                        f"--quick: {QUICK_ROUNDS})")
    parser.add_argument("--processes", type=integer(1, 4096), default=None,
                        help="workers of the all-cores figures (default: one per available core)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a small, short run (scale 12, {QUICK_ROUNDS} rounds of {QUICK_SECONDS} s)")
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


def kronecker_dataset(scale: int, degree: float, seed: int) -> Path:
    """The cached dataset of a Kronecker graph under ``$SAINTPIPE_HOME/datasets/``, generated on first use."""
    from saintpipe.core.paths import home
    from saintpipe.services.dataset.store import write_dataset

    path = home() / "datasets" / f"kronecker-s{scale}-d{degree:g}-seed{seed}"
    if not (path / "manifest.json").is_file():
        from saintpipe.services.dataset.kronecker import generate_kronecker

        log.warning("generating Kronecker graph scale %d degree %g into %s (once)", scale, degree, path)
        write_dataset(path, overwrite=True,
                      **generate_kronecker(scale, degree, seed=seed, feature_dim=8, progress=True))
    return path


def _graphs(scales: list[int], degree: float, seed: int, cora: bool):
    """Yield (name, indptr, indices); Kronecker graphs come from (or go to) the dataset cache."""
    import numpy as np

    from saintpipe.core.errors import DatasetError
    from saintpipe.services.dataset.store import open_dataset

    for scale in scales:
        data = open_dataset(kronecker_dataset(scale, degree, seed))
        yield f"kronecker-s{scale}", data.indptr, data.indices
    if cora:
        if not CORA.is_file():
            raise DatasetError(f"{CORA}: cora test graph not found "
                               "(run from a source checkout or pass --no-cora)")
        with np.load(CORA) as npz:
            yield "cora", npz["indptr"], npz["indices"]


def _row(graph: str, sampler: str, cores: int, runs: list, rates: Summary) -> dict:
    """A row from the measured rounds of one configuration: medians over rounds, sizes over all of them."""
    import statistics

    subgraphs = sum(t.subgraphs for t in runs)
    return {"graph": graph, "sampler": sampler, "cores": cores, "subgraphs_per_s": rates.median,
            "iqr_pct": rates.iqr_pct, "nodes_per_s": statistics.median(t.nodes_per_s for t in runs),
            "edges_per_s": statistics.median(t.edges_per_s for t in runs),
            "mean_nodes": sum(t.nodes for t in runs) / subgraphs,
            "mean_edges": sum(t.edges for t in runs) / subgraphs}


def _measure_in_rounds(sources: dict, seconds: float, rounds: int, seed: int) -> tuple[RoundsResult, dict]:
    """Measure every ``name -> (sampler, cores)`` once per round (one discarded warm-up round first).

    Returns the rounds of subgraphs/s and, per name, the ``Throughput`` of each measured round.
    """
    from saintpipe.core.rounds import run_rounds
    from saintpipe.services.sampler.parallel import measure_throughput

    runs: dict[str, list] = {name: [] for name in sources}

    def measure(name: str):
        source, cores = sources[name]

        def once() -> float:
            t = measure_throughput(source, seconds=seconds, processes=cores, job_seed=seed)
            runs[name].append(t)
            return t.subgraphs_per_s

        return once

    result = run_rounds({name: measure(name) for name in sources}, rounds=rounds, warmup=1, seed=seed)
    return result, {name: throughputs[-rounds:] for name, throughputs in runs.items()}


def _bench(args: argparse.Namespace) -> int:
    from saintpipe.core.report import emit_report
    from saintpipe.core.errors import InvalidArgument
    from saintpipe.core.rounds import ratio_figures
    from saintpipe.services.sampler.config import parse_sampler_config
    from saintpipe.services.sampler.parallel import available_cores
    from saintpipe.services.sampler.reference import NumpySampler, frontier_direct_nodes, numpy_random_walk_nodes
    from saintpipe.services.sampler.sampler import make_sampler

    scales_text = args.scales if args.scales is not None else (QUICK_SCALES if args.quick else "18,20")
    try:
        scales = [int(s) for s in _parse_list(scales_text, "scales")]
    except ValueError:
        raise InvalidArgument(f"--scales: expected comma-separated integers, got {scales_text!r}") from None
    seconds = args.seconds if args.seconds is not None else (QUICK_SECONDS if args.quick else SECONDS)
    rounds = args.rounds if args.rounds is not None else (QUICK_ROUNDS if args.quick else ROUNDS)
    kinds = _parse_list(args.samplers, "samplers", KINDS)
    processes = args.processes or len(available_cores())
    configs = {kind: parse_sampler_config({"kind": kind}) for kind in kinds}

    rows: list[dict] = []
    summary: dict[str, object] = {}
    for graph, indptr, indices in _graphs(scales, args.degree, args.seed, not args.no_cora):
        # (label, cores) -> sampler; every one is measured once per round, the rounds interleaving them all.
        sources: dict[tuple[str, int], object] = {}
        for kind, config in configs.items():
            sampler = make_sampler(config, indptr, indices)
            sources[(kind, 1)] = sampler
            if processes > 1:
                sources[(kind, processes)] = sampler
        if "random_walk" in configs:
            cfg = cast("RandomWalkConfig", configs["random_walk"])  # parsed from kind random_walk
            sources[(NUMPY, 1)] = NumpySampler(indptr, indices, numpy_random_walk_nodes, cfg.roots, cfg.walk_length)
        if "frontier" in configs:
            frontier = cast("FrontierConfig", configs["frontier"])  # parsed from kind frontier
            sources[(DIRECT, 1)] = NumpySampler(indptr, indices, frontier_direct_nodes, frontier.frontier_size,
                                                frontier.node_budget)
        names = {key: f"{key[0]}@{key[1]}" for key in sources}
        result, runs = _measure_in_rounds({names[k]: (src, k[1]) for k, src in sources.items()}, seconds,
                                          rounds, args.seed)
        log.info("%s done", graph)

        def row(key: tuple[str, int]) -> dict:
            return _row(graph, key[0], key[1], runs[names[key]], result.summary(names[key]))

        for kind in configs:
            one = row((kind, 1))
            rows.append(one)
            if processes > 1:
                many = row((kind, processes))
                many["scaling"] = many["subgraphs_per_s"] / one["subgraphs_per_s"]
                many["scaling_paired"] = result.ratio(names[(kind, processes)], names[(kind, 1)])
                rows.append(many)
                summary[f"{graph} {kind}: scaling / cores"] = many["scaling"] / processes
                summary[f"{graph} {kind}: scaling / cores, paired"] = many["scaling_paired"] / processes
        for kind, baseline, label in (("random_walk", NUMPY, "random_walk / numpy baseline (1 core)"),
                                      ("frontier", DIRECT, "frontier dashboard / direct Algorithm 2 (1 core)")):
            if kind in configs:
                base = row((baseline, 1))
                rows.append(base)
                key = f"{graph} {label}"
                summary[key] = result.summary(names[(kind, 1)]).median / base["subgraphs_per_s"]
                summary.update(ratio_figures(key, result.ratio_summary(names[(kind, 1)], names[(baseline, 1)]),
                                             sep=", "))
    if len(scales) >= 2:
        summary.update(_growth(scales, args.degree, args.seed, configs, seconds, rounds, rows))
    params = {"scales": scales_text, "degree": args.degree, "seconds": seconds, "rounds": rounds, "warmup": 1,
              "processes": processes, "samplers": ",".join(kinds),
              "targets": "random_walk/numpy >= 5, frontier/direct >= 5, scaling/cores >= 0.85"}
    columns = ["graph", "sampler", "cores", "subgraphs_per_s", "iqr_pct", "nodes_per_s", "edges_per_s",
               "mean_nodes", "mean_edges", "scaling", "scaling_paired", "ms_per_subgraph", "scanned_per_subgraph",
               "ns_per_scanned_entry"]
    emit_report("sampler", rows, params=params, summary=summary, as_json=args.json, columns=columns)
    return 0


def _growth(scales: list[int], degree: float, seed: int, configs: dict, seconds: float, rounds: int,
            rows: list[dict]) -> dict[str, float]:
    """Per-subgraph time at the largest scale over the smallest, every (kind, scale) in the same rounds.

    Appends one ``growth`` row per (kind, scale) to ``rows`` and returns the summary keys.
    """
    from saintpipe.core.rounds import ratio_figures
    from saintpipe.services.sampler.sampler import make_sampler

    graphs = {name: (indptr, indices) for name, indptr, indices in _graphs(scales, degree, seed, cora=False)}
    small, large = f"kronecker-s{min(scales)}", f"kronecker-s{max(scales)}"
    sources = {f"{kind}@{graph}": (make_sampler(config, *graphs[graph]), 1)
               for kind, config in configs.items() for graph in graphs}
    result, runs = _measure_in_rounds(sources, seconds, rounds, seed)
    summary: dict[str, float] = {}
    for kind in configs:
        scanned = {}
        for graph in graphs:
            row = _row(graph, kind, 1, runs[f"{kind}@{graph}"], result.summary(f"{kind}@{graph}"))
            row["sampler"] = f"{kind} (growth phase)"
            row["ms_per_subgraph"] = 1000.0 / row["subgraphs_per_s"]
            scanned[graph] = row["scanned_per_subgraph"] = _scanned_entries(sources[f"{kind}@{graph}"][0], seed)
            row["ns_per_scanned_entry"] = 1e6 * row["ms_per_subgraph"] / scanned[graph]
            rows.append(row)
        span = f"s{min(scales)}->s{max(scales)}"
        key = f"{kind} growth {span}"
        # time per subgraph large / small = rate small / rate large, paired round by round
        ratios = result.ratio_summary(f"{kind}@{small}", f"{kind}@{large}")
        summary[key] = ratios.median
        summary.update(ratio_figures(key, ratios, sep=", "))
        # the growth split into the work the graph's degrees ask for and the time each unit of it takes
        work = scanned[large] / scanned[small]
        summary[f"{kind} scanned entries growth {span}"] = work
        summary[f"{kind} growth per scanned entry {span}"] = ratios.median / work
    return summary


SCANNED_SAMPLES = 32


def _scanned_entries(sampler, seed: int) -> float:
    """Neighbour-list entries induction reads per subgraph, mean of a few: the lengths of the node set's
    oriented lists (``induction = "oriented"``), or of its rows (the sum of its degrees) with ``"scan"``.

    The samplers reach nodes in proportion to their degree, so the sum of the degrees grows with the graph's
    degree tail (E[d^2] / E[d]) even at a fixed mean degree; the oriented lists of hubs stay short.
    """
    import numpy as np

    indptr = sampler.orientation.indptr if sampler.orientation.indptr.size else sampler.indptr
    lengths = np.diff(indptr)
    return float(np.mean([lengths[sampler.sample_nodes(seed + i)].sum() for i in range(SCANNED_SAMPLES)]))
