"""Graph layers of section 2.1: GCN (eq. 4), GraphSAGE (eq. 1), GAT (eqs. 6-7) and MixHop (eq. 5).

Each layer maps (X, batch) to its pre-activation output and runs every A·X·W
product through :func:`saintpipe.trainer.ops.sparse_chain` (or MixHop's power chain) in
the order the :class:`~saintpipe.trainer.schedule.Scheduler` picks from the shapes.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from saintpipe.trainer.batch import GraphBatch
from saintpipe.trainer.ops import dense, sparse_chain, spmm
from saintpipe.trainer.schedule import AX_FIRST, ChainShape, MixHopShape, Scheduler
from saintpipe.trainer.sparse import SparseOperand


def _glorot(rows: int, cols: int) -> nn.Parameter:
    bound = math.sqrt(6.0 / (rows + cols))
    return nn.Parameter(torch.empty(rows, cols).uniform_(-bound, bound))


def _shape(op: SparseOperand, x: torch.Tensor, f_out: int, values_grad: bool = False) -> ChainShape:
    backward = torch.is_grad_enabled()
    return ChainShape(
        n=op.n,
        nnz=op.nnz,
        f_in=x.shape[1],
        f_out=f_out,
        x_grad=backward and x.requires_grad,
        values_grad=backward and values_grad,
        backward=backward,
    )


class GraphLayer(nn.Module):
    """Common parts: a name for the scheduler's log, the widths and an optional bias."""

    def __init__(self, name: str, f_in: int, f_out: int, bias: bool) -> None:
        super().__init__()
        self.name, self.f_in, self.f_out = name, f_in, f_out
        self.bias = nn.Parameter(torch.zeros(f_out)) if bias else None

    def _add_bias(self, y: torch.Tensor) -> torch.Tensor:
        return y if self.bias is None else y + self.bias

    def forward(self, x: torch.Tensor, batch: GraphBatch, scheduler: Scheduler) -> torch.Tensor:
        raise NotImplementedError


class GCNLayer(GraphLayer):
    """Eq. 4: Â·X·W with Â the self-loop-renormalized adjacency."""

    def __init__(self, name: str, f_in: int, f_out: int, bias: bool = True) -> None:
        super().__init__(name, f_in, f_out, bias)
        self.weight = _glorot(f_in, f_out)

    def forward(self, x, batch, scheduler):
        op = batch.adj_hat
        plan = scheduler.chain(self.name, _shape(op, x, self.f_out))
        return self._add_bias(sparse_chain(op, x, self.weight, plan))


class SAGELayer(GraphLayer):
    """Eq. 1: Ã·X·W_* ‖ X·W_∘, each path half of the output width."""

    def __init__(self, name: str, f_in: int, f_out: int, bias: bool = True) -> None:
        super().__init__(name, f_in, f_out, bias)
        self.weight_neigh = _glorot(f_in, f_out // 2)
        self.weight_self = _glorot(f_in, f_out // 2)

    def forward(self, x, batch, scheduler):
        op = batch.adj
        plan = scheduler.chain(self.name, _shape(op, x, self.f_out // 2))
        neigh = sparse_chain(op, x, self.weight_neigh, plan)
        # own(x): x itself, but for a row block (layer-wise inference) whose inputs are its neighbours' rows too
        return self._add_bias(torch.cat([neigh, dense(op.own(x), self.weight_self)], dim=1))


class GATLayer(GraphLayer):
    """Eqs. 6-7 with several heads, concatenated.

    Scores e_vu = LeakyReLU(a_dst·W x_v + a_src·W x_u) over v's neighbours and v itself; the attention matrix
    is their softmax per row, each term weighted by Â's entry, so GraphSAINT's aggregator normalization
    carries over as an importance weight (on a whole graph with Ã = D⁻¹A the weights are uniform per row and
    this is the usual GAT softmax). The scores use X·(W a), n·f_in MACs per head, so the scheduler stays free
    to pick (A_att X) W or A_att (X W).
    """

    def __init__(
        self, name: str, f_in: int, f_out: int, heads: int, negative_slope: float = 0.2, bias: bool = True
    ) -> None:
        super().__init__(name, f_in, f_out, bias)
        self.heads, self.head_dim = heads, f_out // heads
        self.weight = _glorot(f_in, f_out)
        self.att_src = _glorot(heads, self.head_dim)
        self.att_dst = _glorot(heads, self.head_dim)
        self.negative_slope = negative_slope

    def attention(self, x: torch.Tensor, op: SparseOperand) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention weights [e, heads] on ``op``'s pattern and on its diagonal [n, heads]."""
        w = self.weight.view(self.f_in, self.heads, self.head_dim)
        proj = torch.cat(
            [torch.einsum("fhd,hd->fh", w, self.att_src), torch.einsum("fhd,hd->fh", w, self.att_dst)], dim=1
        )
        scores = dense(x, proj)
        src, dst = scores[:, : self.heads], op.own(scores[:, self.heads :])
        rows, cols = op.rows, op.col.long()
        leaky = nn.functional.leaky_relu
        e = leaky(dst[rows] + src[cols], self.negative_slope)
        e_self = leaky(dst + op.own(src), self.negative_slope)
        # Softmax is shift-invariant: a detached row maximum keeps exp() in range at no gradient cost.
        top = e_self.detach().clone()
        top.scatter_reduce_(0, rows[:, None].expand(-1, self.heads), e.detach(), "amax")
        if op.diag is None:  # GAT's operands carry their self-loops apart (what indexing None raised before)
            raise TypeError("GAT attention needs the operand's diagonal (its self-loops)")
        ex = torch.exp(e - top[rows]) * op.values[:, None]
        ex_self = torch.exp(e_self - top) * op.diag[:, None]
        z = ex_self.index_add(0, rows, ex)
        return ex / z[rows], ex_self / z

    def forward(self, x, batch, scheduler):
        op = batch.adj_hat
        att, att_self = self.attention(x, op)
        plan = scheduler.chain(self.name, _shape(op, x, self.head_dim, values_grad=True))
        outs = []
        for h in range(self.heads):
            w_h = self.weight[:, h * self.head_dim : (h + 1) * self.head_dim]
            outs.append(
                sparse_chain(
                    op, x, w_h, plan, values=att[:, h].contiguous(), diag=att_self[:, h].contiguous()
                )
            )
        return self._add_bias(torch.cat(outs, dim=1))


class MixHopLayer(GraphLayer):
    """Eq. 5: ‖_k Â^k·X·W_k over the configured powers k, each path an equal share of the width."""

    def __init__(self, name: str, f_in: int, f_out: int, powers: list[int], bias: bool = True) -> None:
        super().__init__(name, f_in, f_out, bias)
        self.powers = tuple(sorted(powers))
        self.part = f_out // len(self.powers)
        self.weights = nn.ParameterList([_glorot(f_in, self.part) for _ in self.powers])

    def forward(self, x, batch, scheduler):
        op = batch.adj_hat
        backward = torch.is_grad_enabled()
        shape = MixHopShape(
            n=op.n,
            nnz=op.nnz,
            f_in=self.f_in,
            f_out=self.part,
            powers=self.powers,
            x_grad=backward and x.requires_grad,
            backward=backward,
        )
        if scheduler.mixhop(self.name, shape) == AX_FIRST:
            outs = self._sparse_first(x, op)
        else:
            outs = self._dense_first(x, op)
        return self._add_bias(torch.cat(outs, dim=1))

    def combine(self, hops: list[torch.Tensor]) -> torch.Tensor:
        """The output from Â^k·X for each configured power k, in order (layer-wise inference computes
        the powers over the whole graph one hop at a time, then calls this per row block)."""
        return self._add_bias(torch.cat([dense(h, w) for h, w in zip(hops, self.weights, strict=True)], dim=1))

    def _sparse_first(self, x: torch.Tensor, op: SparseOperand) -> list[torch.Tensor]:
        # The shared chain Â X, Â(ÂX), ... : each power reuses the previous one.
        hop, outs = x, []
        for k in range(max(self.powers) + 1):
            if k > 0:
                hop = spmm(op, hop)
            if k in self.powers:
                outs.append(dense(hop, self.weights[self.powers.index(k)]))
        return outs

    def _dense_first(self, x: torch.Tensor, op: SparseOperand) -> list[torch.Tensor]:
        # One GEMM for every W_k, then hop j propagates only the columns of powers >= j.
        q = dense(x, torch.cat(list(self.weights), dim=1))
        outs, cur, first = [], q, 0  # cur holds the columns of powers[first:] after `hop` hops
        for hop in range(max(self.powers) + 1):
            if hop > 0:
                cur = spmm(op, cur)
            if self.powers[first] == hop:
                outs.append(cur[:, : self.part])
                first += 1
                if first < len(self.powers):
                    cur = cur[:, self.part :]
        return outs
