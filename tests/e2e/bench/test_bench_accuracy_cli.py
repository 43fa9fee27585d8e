"""``saintpipe bench accuracy`` through the console script: full-batch and the four samplers, errors in one line,
and nothing left behind (the experiment's private Redis and its shared-memory slots)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _slots() -> set[str]:
    """Shared-memory slots of in-process pools (their job ids start with "inprocess-")."""
    shm = Path("/dev/shm")
    return {p.name for p in shm.glob("saintpipe-pool-*-inprocess-*")} if shm.is_dir() else set()


def test_bench_accuracy_runs_every_sampler_next_to_full_batch(cli):
    before = _slots()
    proc = cli(
        "bench", "accuracy", "--datasets", "cora", "--seeds", "1", "--epochs", "2", "--full-epochs", "5",
        "--roots", "60", "--node-budget", "150", "--edge-budget", "70", "--frontier-size", "40",
        "--frontier-budget", "150", "--norm-subgraphs", "10", "--hidden", "16,16", "--json",
    )
    report = json.loads(proc.stdout)
    assert _slots() <= before, "the experiment's shared-memory slots must go with it"
    rows = {r["training"]: r for r in report["rows"]}
    assert set(rows) == {"full-batch", "random_walk", "node", "edge", "frontier"}
    assert all(0.0 <= r["test_mean"] <= 1.0 and r["seeds"] == 1 for r in rows.values())
    assert {k: rows[k]["normalization"] for k in ("random_walk", "node", "edge", "frontier")} == {
        "random_walk": "smoothed", "node": "exact", "edge": "exact", "frontier": "smoothed"}
    assert all(rows[k]["subgraph_nodes"] > 0 for k in ("random_walk", "node", "edge", "frontier"))
    summary = report["summary"]
    assert summary["cora_full"] == rows["full-batch"]["test_mean"]
    for kind in ("random_walk", "node", "edge", "frontier"):
        assert summary[f"cora_{kind}"] == rows[kind]["test_mean"]
        assert summary[f"cora_{kind}_minus_full_points"] == pytest.approx(
            100 * (rows[kind]["test_mean"] - rows["full-batch"]["test_mean"]))


def test_bench_accuracy_reference_normalization_on_chosen_samplers(cli):
    proc = cli(
        "bench", "accuracy", "--datasets", "citeseer", "--samplers", "node,frontier", "--normalization", "reference",
        "--seeds", "1", "--epochs", "1", "--full-epochs", "2", "--node-budget", "150", "--frontier-size", "40",
        "--frontier-budget", "150", "--norm-subgraphs", "10", "--json",
    )
    report = json.loads(proc.stdout)
    assert [r["training"] for r in report["rows"]] == ["full-batch", "node", "frontier"]
    assert {r["normalization"] for r in report["rows"][1:]} == {"reference"}
    assert set(report["summary"]) == {"citeseer_full", "citeseer_node", "citeseer_node_minus_full_points",
                                      "citeseer_frontier", "citeseer_frontier_minus_full_points"}


def test_bench_accuracy_refuses_exact_normalization_for_random_walk(cli):
    proc = cli("bench", "accuracy", "--normalization", "exact", "--samplers", "random_walk", check=False)
    assert proc.returncode == 2 and "--normalization exact" in proc.stderr and "no closed form" in proc.stderr


def test_bench_accuracy_names_a_missing_dataset(cli):
    proc = cli("bench", "accuracy", "--datasets", "nope", check=False)
    assert proc.returncode == 2 and "nope.npz not found" in proc.stderr


def test_bench_accuracy_reports_both_protocols_on_one_dataset(cli):
    proc = cli(
        "bench", "accuracy", "--datasets", "cora", "--samplers", "node,random_walk", "--graph", "full,train",
        "--seeds", "1", "--epochs", "2", "--full-epochs", "3", "--roots", "60", "--node-budget", "150",
        "--norm-subgraphs", "10", "--json",
    )
    report = json.loads(proc.stdout)
    rows = {(r["training"], r["graph"]): r for r in report["rows"]}
    assert set(rows) == {("full-batch", ""), ("node", "full"), ("random_walk", "full"), ("node", "train"),
                         ("random_walk", "train")}
    assert report["params"]["graphs"] == ["full", "train"]
    for kind in ("node", "random_walk"):
        # From the training graph every subgraph node is a training node; from the full graph most are not.
        assert rows[kind, "train"]["subgraph_nodes"] == rows[kind, "train"]["subgraph_train_nodes"] > 0
        assert rows[kind, "full"]["subgraph_nodes"] > rows[kind, "full"]["subgraph_train_nodes"]
    summary = report["summary"]
    assert summary["cora_node"] == rows["node", "full"]["test_mean"]
    assert summary["cora_node_train_graph"] == rows["node", "train"]["test_mean"]
    assert summary["cora_random_walk_train_graph_minus_full_points"] == pytest.approx(
        100 * (rows["random_walk", "train"]["test_mean"] - rows["full-batch", ""]["test_mean"]))


def test_bench_accuracy_names_an_unknown_graph(cli):
    proc = cli("bench", "accuracy", "--graph", "full,inductive", check=False)
    assert proc.returncode == 2 and "--graph 'full,inductive'" in proc.stderr
