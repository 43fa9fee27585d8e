"""Layer operations as custom autograd functions that follow the scheduler's order in both passes.

:func:`sparse_chain` computes Y = A·X·W for a :class:`~saintpipe.trainer.sparse.SparseOperand`
A in the order a :class:`~saintpipe.trainer.schedule.ChainPlan` prescribes, forward and
backward, multiplying by Aᵀ through the operand's transposed weights. When A's
weights are learned (GAT), it also returns their gradient (an SDDMM on A's
pattern). :func:`spmm` is the single sparse product A·Z with the same
transposed-weights backward, the building block of MixHop's power chains.

:func:`count_macs` counts the multiply-accumulates the functions execute, so
tests can check that a plan costs what the scheduler says it costs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from saintpipe.trainer.schedule import AX_FIRST, XW_FIRST, ChainPlan
from saintpipe.trainer.sparse import SparseOperand

_local = threading.local()


@dataclass
class MacCounter:
    """MACs executed inside a :func:`count_macs` block."""

    dense: int = 0
    sparse: int = 0

    @property
    def total(self) -> int:
        return self.dense + self.sparse


@contextlib.contextmanager
def count_macs() -> Iterator[MacCounter]:
    """Count the MACs the layer ops execute in this thread (for tests and benchmarks)."""
    counter = MacCounter()
    previous = getattr(_local, "counter", None)
    _local.counter = counter
    try:
        yield counter
    finally:
        _local.counter = previous


def _dense(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    counter = getattr(_local, "counter", None)
    if counter is not None:
        counter.dense += a.shape[0] * a.shape[1] * b.shape[1]
    return a @ b


def _count_sparse(op: SparseOperand, width: int) -> None:
    counter = getattr(_local, "counter", None)
    if counter is not None:
        counter.sparse += op.nnz * width


def _a(op: SparseOperand, x: torch.Tensor) -> torch.Tensor:
    _count_sparse(op, x.shape[1])
    return op.matmul(x.contiguous())


def _at(op: SparseOperand, g: torch.Tensor) -> torch.Tensor:
    _count_sparse(op, g.shape[1])
    return op.matmul_t(g.contiguous())


class _SparseChain(torch.autograd.Function):
    """Y = A·X·W in the planned order; grads for X, W and (when learned) A's weights and diagonal."""

    @staticmethod
    def forward(ctx, x, w, values, values_t, diag, pattern: SparseOperand, plan: ChainPlan):
        op = pattern.with_weights(values, values_t, diag)
        p = q = None
        if plan.forward == AX_FIRST:
            p = _a(op, x)
            y = _dense(p, w)
        else:
            q = _dense(x, w)
            y = _a(op, q)
        ctx.op, ctx.plan = op, plan
        ctx.save_for_backward(x, w, p if plan.keep_p else None, q if plan.keep_q else None)
        return y

    @staticmethod
    def backward(ctx, g):
        x, w, p, q = ctx.saved_tensors
        op: SparseOperand = ctx.op
        plan: ChainPlan = ctx.plan
        g = g.contiguous()
        r = s = None  # R = Aᵀ G and S = G Wᵀ, each computed at most once

        def get_r():
            nonlocal r
            if r is None:
                r = _at(op, g)
            return r

        def get_s():
            nonlocal s
            if s is None:
                s = _dense(g, w.t())
            return s

        if plan.grad_w == AX_FIRST:
            grad_w = _dense((p if p is not None else _a(op, x)).t(), g)
        else:
            grad_w = _dense(x.t(), get_r())
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_x = _dense(get_r(), w.t()) if plan.grad_x == AX_FIRST else _at(op, get_s())
        grad_values = grad_diag = None
        if ctx.needs_input_grad[2] or ctx.needs_input_grad[4]:
            if plan.grad_values == "gw":
                a, b = get_s(), x
            else:
                a, b = g, (q if q is not None else _dense(x, w))
            _count_sparse(op, a.shape[1])
            grad_values, grad_diag = op.sampled_dot(a, b)
        return grad_x, grad_w, grad_values, None, grad_diag, None, None


def sparse_chain(
    op: SparseOperand, x: torch.Tensor, w: torch.Tensor, plan: ChainPlan, values: torch.Tensor | None = None,
    diag: torch.Tensor | None = None,
) -> torch.Tensor:
    """Y = A·X·W following ``plan`` in the forward pass and both gradients.

    Args:
        op: A; its pattern, and its weights unless ``values`` is given.
        x: dense n×f_in.
        w: dense f_in×f_out.
        plan: the order of each product (from :class:`~saintpipe.trainer.schedule.Scheduler`).
        values: learned weights of A on ``op``'s pattern (GAT); Aᵀ's weights are
            ``values[op.perm]`` (Algorithm 6's permutation, computed once per subgraph).
        diag: learned diagonal of A, with ``values``.

    Returns:
        Y, n×f_out.
    """
    if values is None:
        return _SparseChain.apply(x, w, op.values, op.values_t, op.diag, op, plan)
    # dA is computed whole by the SDDMM; Aᵀ only carries G back, so without gradients (inference, where a
    # row block has no transpose) it is not needed.
    values_t = values.detach()[op.perm] if torch.is_grad_enabled() else values.detach()
    return _SparseChain.apply(x, w, values, values_t, diag, op, plan)


class _Spmm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, pattern: SparseOperand):
        ctx.op = pattern
        return _a(pattern, z)

    @staticmethod
    def backward(ctx, g):
        return _at(ctx.op, g), None


def spmm(op: SparseOperand, z: torch.Tensor) -> torch.Tensor:
    """A·Z with a backward pass through Aᵀ's stored weights."""
    return _Spmm.apply(z, op)


class _Dense(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return _dense(x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grad_x = _dense(g, w.t()) if ctx.needs_input_grad[0] else None
        grad_w = _dense(x.t(), g) if ctx.needs_input_grad[1] else None
        return grad_x, grad_w


def dense(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """X·W with its gradients, counted by :func:`count_macs` in both passes."""
    return _Dense.apply(x, w)


__all__ = ["AX_FIRST", "XW_FIRST", "MacCounter", "count_macs", "dense", "sparse_chain", "spmm"]
