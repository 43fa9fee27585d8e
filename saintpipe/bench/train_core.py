"""The measurements behind ``saintpipe bench train`` (kept apart so the CLI module stays light)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

import numpy as np
import torch

from saintpipe.core.rounds import ratio_figures, run_rounds, timed
from saintpipe.trainer.adam import Adam
from saintpipe.trainer.batch import batch_from_subgraph
from saintpipe.trainer.config import Arch, ModelConfig, Order
from saintpipe.trainer.models import build_model
from saintpipe.trainer.ops import count_macs
from saintpipe.trainer.schedule import ChainShape, choose_order
from saintpipe.trainer.synthetic import random_subgraph

ORDERS: tuple[Order, ...] = ("auto", "ax_first", "xw_first")


def training_step(config: ModelConfig, batch, classes: int, seed: int, device: torch.device,
                  multilabel: bool = True) -> Callable[[], None]:
    """One training iteration (forward, backward, Adam step) of a fresh model built with ``seed``."""
    torch.manual_seed(seed)
    model = build_model(config, batch.x.shape[1], classes, multilabel=multilabel).to(device).train()
    opt = Adam(model.parameters(), lr=config.lr)  # the trainer's (saintpipe.trainer.step.TrainState)
    cuda = device.type == "cuda"

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss = model.loss(model(batch), batch)
        loss.backward()
        opt.step()
        if cuda:  # kernels run asynchronously: the iteration ends when the GPU is done
            torch.cuda.synchronize(device)

    return step


def _macs(step: Callable[[], None]) -> int:
    """Multiply-accumulates of one iteration, counted by the ops."""
    with count_macs() as counter:
        step()
    return counter.total


def _plans(arch: str, n: int, nnz: int, widths: list[int]) -> str:
    """The scheduled plan of each layer, as the scheduler logs it."""
    out = []
    for i in range(len(widths) - 1):
        f_out = widths[i + 1] // 2 if arch == "sage" else widths[i + 1]
        plan = choose_order(ChainShape(n, nnz, widths[i], f_out, x_grad=i > 0))
        out.append(f"L{i + 1}[{widths[i]}->{f_out}]: {plan.describe()}")
    return "; ".join(out)


def run_benchmark(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Time both models under every order; returns (rows, params, summary) for the report."""
    from saintpipe.trainer.assemble import pick_device

    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(getattr(args, "device", "cpu"))
    sub = random_subgraph(args.nodes, args.degree, seed=args.seed, mean_weights=True)
    rng = np.random.default_rng(args.seed)
    labels = (rng.random((args.nodes, args.classes)) < 0.1).astype(np.uint8)
    train = np.ones(args.nodes, dtype=bool)
    degrees = np.diff(sub.indptr)
    settings: list[tuple[Arch, int, list[int]]] = [
        ("sage", args.sage_features, [args.sage_hidden, args.sage_hidden]),
        ("gcn", args.gcn_features, [args.gcn_hidden, args.gcn_hidden]),
    ]
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for arch, features, hidden in settings:
        feats = rng.normal(size=(args.nodes, features)).astype(np.float32)
        batch = batch_from_subgraph(sub, feats, labels, train, degrees, device=device)
        nnz = batch.adj_hat.nnz if arch == "gcn" else batch.adj.nnz
        steps = {o: training_step(ModelConfig(arch=arch, hidden=hidden, dropout=0.0, order=o), batch, args.classes,
                          args.seed, device) for o in ORDERS}
        macs = {o: _macs(step) for o, step in steps.items()}
        # The three orders take turns, round by round, after discarded warm-up rounds: measured one after
        # the other, whichever ran first took the machine's noise alone (the scheduled order, first, was
        # once timed 224 ms on one run and 155 ms on the next against 169 ms for a fixed order).
        result = run_rounds({o: timed(step) for o, step in steps.items()}, rounds=args.repeats,
                            warmup=args.warmup, seed=args.seed)
        auto = result.summary("auto")
        for order in ORDERS:
            s = result.summary(order)
            paired = result.ratio_summary(order, "auto")
            rows.append(
                {
                    "model": f"{arch} {features}->{'/'.join(map(str, hidden))}",
                    "order": order,
                    "ms_per_iter": s.median * 1e3,
                    "iqr_pct": s.iqr_pct,
                    "ms_min": s.min * 1e3,
                    "ms_max": s.max * 1e3,
                    "gmacs": macs[order] / 1e9,
                    "time_vs_auto": s.median / auto.median,
                    "time_vs_auto_paired": paired.median,
                    "paired_min": paired.min,
                    "paired_max": paired.max,
                    "macs_vs_auto": macs[order] / macs["auto"],
                }
            )
        summary[f"{arch}_plan"] = _plans(arch, args.nodes, nnz, [features, *hidden])
        for order in ("ax_first", "xw_first"):
            key = f"{arch}_{order}_over_auto"
            summary[key] = result.summary(order).median / auto.median
            summary.update(ratio_figures(key, result.ratio_summary(order, "auto")))
    params = {
        "nodes": args.nodes,
        "edges": int(sub.num_edges),
        "mean_degree": round(sub.num_edges / args.nodes, 2),
        "classes": args.classes,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "threads": torch.get_num_threads(),
        "device": str(device) + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
        "torch": torch.__version__,
    }
    return rows, params, summary
