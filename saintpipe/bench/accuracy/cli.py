"""``saintpipe bench accuracy``: each GraphSAINT sampler's test accuracy vs the published full-batch GCN.

Cora and CiteSeer (standard public split, shipped in tests/data/); for each seed: Kipf and Welling's two-layer
GCN trained full-batch with its recipe, then the trainer's GCN trained on subgraphs of each sampler (random
walk, node, edge, frontier), normalized as --normalization says, drawn from the graphs --graph names: the full
graph (transductive) and/or the graph induced by the training nodes (GraphSAINT's inductive protocol). Prints
mean ± std of the test accuracy at the best validation accuracy and each sampler's difference from full-batch
in points.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[3] / "tests" / "data"


def register(sub: argparse._SubParsersAction) -> None:
    from saintpipe.core.argtypes import integer
    from saintpipe.core.seeds import SEED_MAX
    from saintpipe.core.report import add_json_flag
    from saintpipe.bench.accuracy.settings import NORMALIZATIONS, SAMPLERS, SamplingSetup

    d = SamplingSetup()
    parser = sub.add_parser(
        "accuracy",
        help="each sampler's subgraph training vs full-batch GCN accuracy on Cora/CiteSeer",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--datasets", default="cora,citeseer", help="comma-separated names of NAME.npz files")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where the .npz files are")
    parser.add_argument("--samplers", default=",".join(SAMPLERS),
                        help=f"comma-separated samplers (default {','.join(SAMPLERS)})")
    parser.add_argument("--graph", default="full",
                        help="comma-separated graphs the subgraphs are drawn from: full (the whole graph, the split "
                             "only weighs the loss) and/or train (the graph induced by the training nodes, "
                             "GraphSAINT's inductive protocol); e.g. --graph full,train (default full)")
    parser.add_argument("--seeds", type=integer(1, 1000), default=10, help="number of seeds, 1 to 1000 (default 10)")
    # Room for --seeds (at most 1000) above the first one: every seed stays a valid seed.
    parser.add_argument("--first-seed", type=integer(0, SEED_MAX - 1000), default=0,
                        help="seeds FIRST..FIRST+N-1 (default 0)")
    parser.add_argument("--epochs", type=integer(1, 1_000_000), default=100,
                        help="epochs of the subgraph runs (default 100; an epoch is |V_train| training labels seen)")
    parser.add_argument("--full-epochs", type=integer(1, 1_000_000), default=200,
                        help="epochs of the full-batch GCN (default 200, the recipe's)")
    parser.add_argument("--arch", default="gcn", choices=["gcn", "sage", "gat", "mixhop"],
                        help="the subgraph runs' model (default gcn)")
    parser.add_argument("--hidden", default="16", help="the subgraph runs' graph layer widths (default 16)")
    parser.add_argument("--classifier", default="graph", choices=["graph", "dense"],
                        help="the subgraph runs' output layer: graph = Â·H·W as in the GCN paper (default), "
                             "dense = H·W (GraphSAINT's eq. 2)")
    parser.add_argument("--bias", action="store_true", help="biases in the subgraph runs' model (Kipf's GCN has none)")
    parser.add_argument("--normalization", default="auto", choices=NORMALIZATIONS,
                        help="estimator of the subgraph runs' coefficients; auto: exact for node and edge, "
                             "smoothed for random_walk and frontier (default auto)")
    parser.add_argument("--roots", type=integer(1, 2**31 - 1), default=d.roots, help="random-walk roots per subgraph")
    parser.add_argument("--walk-length", type=integer(0, 10_000), default=d.walk_length)
    parser.add_argument("--node-budget", type=integer(1, 2**31 - 1), default=d.node_budget,
                        help="node sampler: nodes drawn per subgraph")
    parser.add_argument("--edge-budget", type=integer(1, 2**31 - 1), default=d.edge_budget,
                        help="edge sampler: edges drawn per subgraph")
    parser.add_argument("--frontier-size", type=integer(1, 2**31 - 1), default=d.frontier_size,
                        help="frontier sampler: m")
    parser.add_argument("--frontier-budget", type=integer(1, 2**31 - 1), default=d.frontier_budget,
                        help="frontier sampler: n (>= m)")
    parser.add_argument("--norm-subgraphs", type=integer(1, 10_000_000), default=d.norm_subgraphs,
                        help="subgraphs counted by the smoothed and reference (pre-sampled) and online "
                             "estimators (default 200)")
    parser.add_argument("--threads", type=integer(0, 4096), default=1,
                        help="torch threads (default 1: the sampler's thread gets the other core; 0: torch's default)")
    add_json_flag(parser)
    parser.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    import torch

    from saintpipe.core.errors import InvalidArgument
    from saintpipe.core.report import emit_report
    from saintpipe.bench.accuracy.experiment import DEFAULT_MODEL, GRAPHS, compare, summary_of
    from saintpipe.bench.accuracy.settings import SAMPLERS, SamplingSetup
    from saintpipe.bench.accuracy.full_batch import KipfRecipe
    from saintpipe.trainer.config import ModelConfig

    try:
        hidden = [int(h) for h in args.hidden.split(",")]
    except ValueError:
        raise InvalidArgument(f"--hidden {args.hidden!r}: expected comma-separated integers") from None
    samplers = [s for s in args.samplers.split(",") if s]
    unknown = [s for s in samplers if s not in SAMPLERS]
    if unknown or not samplers:
        raise InvalidArgument(f"--samplers {args.samplers!r}: expected some of {','.join(SAMPLERS)}")
    graphs = list(dict.fromkeys(g for g in args.graph.split(",") if g))
    if not graphs or set(graphs) - set(GRAPHS):
        raise InvalidArgument(f"--graph {args.graph!r}: expected some of {','.join(GRAPHS)}")
    if args.normalization == "exact" and {"random_walk", "frontier"} & set(samplers):
        raise InvalidArgument("--normalization exact: random_walk and frontier have no closed form; "
                              "use --samplers node,edge or another estimator")
    if args.frontier_budget < args.frontier_size:
        raise InvalidArgument(f"--frontier-budget ({args.frontier_budget}) must be >= --frontier-size "
                              f"({args.frontier_size})")
    datasets = {name: args.data_dir / f"{name}.npz" for name in args.datasets.split(",") if name}
    for name, path in datasets.items():
        if not path.is_file():
            raise InvalidArgument(f"--datasets: {path} not found (dataset {name!r})")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model = DEFAULT_MODEL.model_copy(update={"arch": args.arch, "classifier": args.classifier, "bias": args.bias})
        model = ModelConfig.model_validate({**model.model_dump(), "hidden": hidden})
    except ValueError as exc:
        raise InvalidArgument(f"--hidden {args.hidden!r} with --arch {args.arch}: {exc}") from None
    sampling = SamplingSetup(
        roots=args.roots, walk_length=args.walk_length, node_budget=args.node_budget, edge_budget=args.edge_budget,
        frontier_size=args.frontier_size, frontier_budget=args.frontier_budget, normalization=args.normalization,
        norm_subgraphs=args.norm_subgraphs,
    )
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    rows = compare(datasets, seeds, args.epochs, model, sampling, samplers, KipfRecipe(epochs=args.full_epochs),
                   graphs=graphs)
    params = {
        "full_batch": f"Kipf GCN (hidden 16, dropout 0.5, weight decay 5e-4 on layer 1, {args.full_epochs} epochs)",
        "model": model.model_dump(include={"arch", "hidden", "classifier", "bias", "dropout", "lr", "weight_decay"}),
        "epochs": args.epochs,
        "seeds": seeds,
        "graphs": graphs,
        "normalization": args.normalization,
        "norm_subgraphs": args.norm_subgraphs,
        "samplers": {kind: sampling.sampler_config(kind).model_dump(exclude={"kind", "kappa"}) for kind in samplers},
    }
    columns = ["dataset", "training", "graph", "normalization", "subgraph_nodes", "subgraph_train_nodes", "test_mean",
               "test_std", "minus_full_points", "published", "min", "max", "seeds"]
    emit_report("accuracy", rows, params=params, summary=summary_of(rows), as_json=args.json,
                columns=None if args.json else columns)
    return 0
