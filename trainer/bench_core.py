"""The measurements behind ``saintpipe bench train`` (kept apart so the CLI module stays light)."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import torch

from saintpipe.trainer.batch import batch_from_subgraph
from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.models import build_model
from saintpipe.trainer.ops import count_macs
from saintpipe.trainer.schedule import ChainShape, choose_order
from saintpipe.trainer.synthetic import random_subgraph

ORDERS = ("auto", "ax_first", "xw_first")


def _iteration_seconds(
    config: ModelConfig, batch, classes: int, repeats: int, warmup: int, seed: int
) -> tuple[float, int]:
    torch.manual_seed(seed)
    model = build_model(config, batch.x.shape[1], classes, multilabel=True).train()
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = model.loss(model(batch), batch)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    with count_macs() as counter:
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times), counter.total


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
    if args.threads:
        torch.set_num_threads(args.threads)
    sub = random_subgraph(args.nodes, args.degree, seed=args.seed, mean_weights=True)
    rng = np.random.default_rng(args.seed)
    labels = (rng.random((args.nodes, args.classes)) < 0.1).astype(np.uint8)
    train = np.ones(args.nodes, dtype=bool)
    degrees = np.diff(sub.indptr)
    settings = [
        ("sage", args.sage_features, [args.sage_hidden, args.sage_hidden]),
        ("gcn", args.gcn_features, [args.gcn_hidden, args.gcn_hidden]),
    ]
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for arch, features, hidden in settings:
        feats = rng.normal(size=(args.nodes, features)).astype(np.float32)
        batch = batch_from_subgraph(sub, feats, labels, train, degrees)
        nnz = batch.adj_hat.nnz if arch == "gcn" else batch.adj.nnz
        timing = {}
        for order in ORDERS:
            cfg = ModelConfig(arch=arch, hidden=hidden, dropout=0.0, order=order)
            seconds, macs = _iteration_seconds(cfg, batch, args.classes, args.repeats, args.warmup, args.seed)
            timing[order] = (seconds, macs)
        auto_s, auto_macs = timing["auto"]
        for order in ORDERS:
            seconds, macs = timing[order]
            rows.append(
                {
                    "model": f"{arch} {features}->{'/'.join(map(str, hidden))}",
                    "order": order,
                    "ms_per_iter": seconds * 1e3,
                    "gmacs": macs / 1e9,
                    "time_vs_auto": seconds / auto_s,
                    "macs_vs_auto": macs / auto_macs,
                }
            )
        summary[f"{arch}_plan"] = _plans(arch, args.nodes, nnz, [features, *hidden])
        summary[f"{arch}_ax_first_over_auto"] = timing["ax_first"][0] / auto_s
        summary[f"{arch}_xw_first_over_auto"] = timing["xw_first"][0] / auto_s
    params = {
        "nodes": args.nodes,
        "edges": int(sub.num_edges),
        "mean_degree": round(sub.num_edges / args.nodes, 2),
        "classes": args.classes,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    return rows, params, summary
