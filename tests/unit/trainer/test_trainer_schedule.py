"""The matmul-order scheduler: the cost model matches the executed work, and the choice is the cheapest."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from saintpipe.trainer.ops import count_macs, sparse_chain, spmm
from saintpipe.trainer.schedule import (
    AX_FIRST,
    XW_FIRST,
    ChainShape,
    MixHopShape,
    Scheduler,
    all_plans,
    choose_mixhop_order,
    choose_order,
    macs,
    mixhop_macs,
)
from saintpipe.trainer.sparse import SparseOperand, transpose_permutation
from saintpipe.trainer.synthetic import random_subgraph


def operand(n: int = 80, seed: int = 0, diag: bool = False) -> SparseOperand:
    sub = random_subgraph(n, 8.0, seed)
    op = SparseOperand.from_csr(sub.indptr, sub.indices, sub.edge_weights, sub.edge_weights_t)
    if diag:
        op = op.with_weights(op.values, op.values_t, torch.rand(n))
    return op


def executed(op: SparseOperand, f_in: int, f_out: int, plan, x_grad: bool, learned: bool) -> int:
    """MACs the chain really performs, forward and backward, under ``plan``."""
    torch.manual_seed(0)
    x = torch.randn(op.n, f_in, requires_grad=x_grad)
    w = torch.randn(f_in, f_out, requires_grad=True)
    values = op.values.clone().requires_grad_(True) if learned else None
    diag = op.diag.clone().requires_grad_(True) if (learned and op.diag is not None) else None
    with count_macs() as counter:
        y = sparse_chain(op, x, w, plan, values=values, diag=diag)
        y.backward(torch.ones_like(y))
    return counter.total


@pytest.mark.parametrize("f_in,f_out", [(8, 64), (64, 8), (32, 32)])
@pytest.mark.parametrize("x_grad", [True, False])
@pytest.mark.parametrize("learned", [False, True])
def test_cost_model_equals_executed_macs_and_choice_is_minimal(f_in, f_out, x_grad, learned):
    op = operand(diag=learned)
    shape = ChainShape(op.n, op.nnz, f_in, f_out, x_grad=x_grad, values_grad=learned)
    measured = {}
    for plan in all_plans(shape):
        measured[plan] = executed(op, f_in, f_out, plan, x_grad, learned)
        assert measured[plan] == macs(shape, plan).total, plan
    chosen = choose_order(shape)
    assert measured[chosen] == min(measured.values())


def test_paper_rule_section_6_1():
    """f_in < f_out: (AX)W, (AX)ᵀG reused, Aᵀ(GWᵀ); f_in > f_out: the transposed choices."""
    widen = choose_order(ChainShape(n=8000, nnz=120_000, f_in=50, f_out=256))
    assert (widen.forward, widen.grad_w, widen.grad_x) == (AX_FIRST, AX_FIRST, XW_FIRST)
    narrow = choose_order(ChainShape(n=8000, nnz=120_000, f_in=500, f_out=16))
    assert (narrow.forward, narrow.grad_w, narrow.grad_x) == (XW_FIRST, XW_FIRST, AX_FIRST)
    first_layer = choose_order(ChainShape(n=8000, nnz=120_000, f_in=500, f_out=16, x_grad=False))
    assert first_layer.grad_x is None and first_layer.forward == XW_FIRST
    inference = choose_order(ChainShape(n=8000, nnz=120_000, f_in=500, f_out=16, backward=False))
    assert (inference.forward, inference.grad_w) == (XW_FIRST, None)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 100_000),
    degree=st.integers(0, 60),
    f_in=st.integers(1, 2048),
    f_out=st.integers(1, 2048),
    x_grad=st.booleans(),
    learned=st.booleans(),
)
def test_choice_never_costs_more_than_any_plan_or_the_fixed_orders(n, degree, f_in, f_out, x_grad, learned):
    shape = ChainShape(n, n * degree, f_in, f_out, x_grad=x_grad, values_grad=learned)
    best = macs(shape, choose_order(shape)).total
    assert best == min(macs(shape, p).total for p in all_plans(shape))
    for order in (AX_FIRST, XW_FIRST):
        forced = choose_order(shape, order)
        assert forced.forward == forced.grad_w == order and forced.grad_x in (order, None)
        assert best <= macs(shape, forced).total


def test_unknown_order_is_an_error():
    with pytest.raises(ValueError, match="sparse_first"):
        choose_order(ChainShape(10, 10, 2, 2), "sparse_first")
    with pytest.raises(ValueError):
        Scheduler("fastest")


def test_plan_logged_once_per_layer_and_widths(caplog):
    scheduler = Scheduler()
    with caplog.at_level(logging.INFO, logger="saintpipe.trainer.schedule"):
        for n in (100, 120, 130):  # subgraph sizes vary step to step; the plan does not
            scheduler.chain("layer1", ChainShape(n, n * 10, 50, 256))
        scheduler.chain("layer2", ChainShape(100, 1000, 256, 16))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "layer1" in lines[0] and "Y=(AX)W" in lines[0]
    assert "layer2" in lines[1] and "Y=A(XW)" in lines[1]


@pytest.mark.parametrize("order", [AX_FIRST, XW_FIRST])
@pytest.mark.parametrize("x_grad", [True, False])
def test_mixhop_cost_model_equals_executed_macs(order, x_grad):
    from saintpipe.trainer.batch import GraphBatch
    from saintpipe.trainer.layers import MixHopLayer

    op = operand(n=60, seed=2, diag=True)
    layer = MixHopLayer("m", 20, 3 * 7, [0, 1, 3], bias=False)
    batch = GraphBatch(
        adj=op,
        x=torch.randn(60, 20),
        labels=torch.zeros(60, dtype=torch.long),
        loss_weights=torch.ones(60),
        degrees=torch.ones(60),
        _adj_hat=op,
    )
    x = batch.x.requires_grad_(x_grad)
    with count_macs() as counter:
        layer(x, batch, Scheduler(order)).sum().backward()
    shape = MixHopShape(op.n, op.nnz, 20, 7, (0, 1, 3), x_grad=x_grad)
    assert counter.total == mixhop_macs(shape, order).total
    assert choose_mixhop_order(shape) == min((AX_FIRST, XW_FIRST), key=lambda o: mixhop_macs(shape, o).total)


def test_transposed_weights_are_algorithm_6():
    sub = random_subgraph(70, 6.0, 4)
    rows = np.repeat(np.arange(70), np.diff(sub.indptr))
    full = np.zeros((70, 70), dtype=np.float32)
    full[rows, sub.indices] = sub.edge_weights
    perm = transpose_permutation(sub.indptr, sub.indices)
    np.testing.assert_array_equal(sub.edge_weights[perm], full.T[rows, sub.indices])
    np.testing.assert_array_equal(sub.edge_weights_t, full.T[rows, sub.indices])
    op = SparseOperand.from_csr(sub.indptr, sub.indices, sub.edge_weights, sub.edge_weights_t)
    dense = torch.zeros(70, 70)
    dense[op.rows, op.col.long()] = op.values
    g = torch.randn(70, 5)
    torch.testing.assert_close(op.matmul_t(g), dense.t() @ g)
    torch.testing.assert_close(op.matmul(g), dense @ g)
    torch.testing.assert_close(spmm(op, g), dense @ g)
