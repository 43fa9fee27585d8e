"""The sparse operand of a layer: a subgraph's CSR with forward and transposed weights.

A :class:`SparseOperand` holds one n×n matrix A as CSR (``crow``, ``col``, ``values``), the weights of Aᵀ at
the *same* positions (``values_t``), and an optional diagonal kept apart from the CSR (self-loops of
GCN/GAT/MixHop, so the sampled pattern never has to be rebuilt). Because induced subgraphs of an undirected
graph have a symmetric pattern, ``crow``/``col`` with ``values_t`` *is* Aᵀ: the backward pass multiplies by it
directly (Algorithm 6 of the GraphSAINT parallel-training paper), no transpose at run time.

Indices are int32: the CPU CSR kernel is several times faster with int32 than
with int64 (measured in ``saintpipe bench train``'s set-up), and subgraphs are far below 2³¹ entries.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from numba import njit

from saintpipe.core.tensors import as_tensor


@contextmanager
def _quiet_beta():
    # torch warns once per process that CSR support is "beta"; the operations used here are stable.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        yield


@njit(cache=True)
def transpose_permutation(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Algorithm 6 on positions: ``perm`` with ``Aᵀ.data == A.data[perm]`` for a symmetric pattern.

    Walks the CSR once in row order and appends each entry's position to the
    next free slot of its column's row (rows are sorted, so slots fill in order).
    """
    n = indptr.size - 1
    nxt = indptr[:-1].copy()
    perm = np.empty(indices.size, dtype=np.int64)
    for v in range(n):
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            perm[nxt[u]] = j
            nxt[u] += 1
    return perm


@dataclass
class SparseOperand:
    """A (n×n) in CSR with its transposed weights and an optional separate diagonal.

    Attributes:
        n: the number of rows/columns.
        crow: int32 [n+1] row pointers.
        col: int32 [e] column indices, sorted within each row.
        values: float [e] weights of A.
        values_t: float [e] weights of Aᵀ at the same positions.
        diag: float [n] diagonal added to A (and to Aᵀ), or None.
        cols: columns when A is a row block of a larger graph (n×cols, for layer-wise inference); None: square.
            A row block has no transpose: it serves forward passes only.
        first: in a row block, the column of row 0's own node: rows i are columns ``first + i``, so the
            diagonal and the self paths read ``x[first:first + n]`` (:meth:`own`).
    """

    n: int
    crow: torch.Tensor
    col: torch.Tensor
    values: torch.Tensor
    values_t: torch.Tensor
    diag: torch.Tensor | None = None
    cols: int | None = None
    first: int = 0
    _rows: torch.Tensor | None = field(default=None, repr=False)
    _perm: torch.Tensor | None = field(default=None, repr=False)
    _csr: tuple | None = field(default=None, repr=False)

    @classmethod
    def from_csr(
        cls,
        indptr: np.ndarray,
        indices: np.ndarray,
        values: np.ndarray,
        values_t: np.ndarray,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        cols: int | None = None,
        first: int = 0,
    ) -> SparseOperand:
        """Build from numpy CSR arrays (a :class:`~saintpipe.core.subgraph.Subgraph`'s or a whole graph's;
        with ``cols``, a row block's)."""
        n = int(indptr.size - 1)
        if int(indptr[-1]) >= 2**31:
            raise ValueError(f"{int(indptr[-1])} entries do not fit int32 CSR indices")
        return cls(
            n=n,
            crow=as_tensor(indptr, np.int32).to(device),
            col=as_tensor(indices, np.int32).to(device),
            values=as_tensor(values, np.float32).to(device=device, dtype=dtype),
            values_t=as_tensor(values_t, np.float32).to(device=device, dtype=dtype),
            cols=cols,
            first=first,
        )

    @property
    def num_entries(self) -> int:
        return int(self.col.numel())

    @property
    def nnz(self) -> int:
        """MACs per output column of one product with this operand (entries plus diagonal)."""
        return self.num_entries + (self.n if self.diag is not None else 0)

    @property
    def device(self) -> torch.device:
        return self.col.device

    @property
    def rows(self) -> torch.Tensor:
        """int64 [e]: the row of each stored entry."""
        if self._rows is None:
            counts = (self.crow[1:] - self.crow[:-1]).long()
            self._rows = torch.repeat_interleave(torch.arange(self.n, device=self.device), counts)
        return self._rows

    @property
    def perm(self) -> torch.Tensor:
        """int64 [e]: ``values_t == values[perm]`` for any weights on this (symmetric) pattern."""
        if self.cols is not None:  # the kernel would index past its arrays: a row block has no transpose
            raise ValueError("a row block (rectangular operand) has no transpose permutation")
        if self._perm is None:
            perm = transpose_permutation(self.crow.cpu().numpy().astype(np.int64), self.col.cpu().numpy())
            self._perm = torch.from_numpy(perm).to(self.device)
        return self._perm

    def own(self, x: torch.Tensor) -> torch.Tensor:
        """The rows of ``x`` (indexed like A's columns) that are A's own rows' nodes: all of a square A's."""
        return x if self.cols is None else x[self.first : self.first + self.n]

    def with_weights(
        self, values: torch.Tensor, values_t: torch.Tensor, diag: torch.Tensor | None
    ) -> SparseOperand:
        """The same pattern with other weights (keeps the cached rows and permutation)."""
        return replace(self, values=values, values_t=values_t, diag=diag, _csr=None)

    def with_self_loops(self, degrees: torch.Tensor) -> SparseOperand:
        """Â = diag(1/(1+d)) + diag(d/(1+d))·A, the self-loop renormalization of eq. 4.

        With A = D⁻¹A (mean aggregation) this is exactly (I+D)⁻¹(I+A), the
        random-walk form of GCN's renormalization trick; with GraphSAINT's
        aggregator-normalized weights it is the same mix of self and neighbours.
        ``degrees`` (float [n], or [cols] for a row block) are the nodes' degrees in the full graph.
        """
        d = degrees.to(device=self.device, dtype=self.values.dtype)
        mix = d / (1.0 + d)
        values = self.own(mix)[self.rows] * self.values
        values_t = mix[self.col.long()] * self.values_t  # Âᵀ[v,u] = Â[u,v] = mix_u · Aᵀ[v,u]
        return self.with_weights(values, values_t, 1.0 / (1.0 + self.own(d)))

    def _tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._csr is None:
            size = (self.n, self.n if self.cols is None else self.cols)
            with _quiet_beta():
                self._csr = (
                    torch.sparse_csr_tensor(self.crow, self.col, self.values, size, check_invariants=False),
                    torch.sparse_csr_tensor(self.crow, self.col, self.values_t, size, check_invariants=False),
                )
        return self._csr

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """A · x (x dense n×f)."""
        out = self._tensors()[0] @ x
        return out if self.diag is None else out.add_(self.diag[:, None] * self.own(x))

    def matmul_t(self, g: torch.Tensor) -> torch.Tensor:
        """Aᵀ · g using the transposed weights (no transpose at run time)."""
        out = self._tensors()[1] @ g
        return out if self.diag is None else out.add_(self.diag[:, None] * g)

    def sampled_dot(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """SDDMM: ``(a bᵀ)`` at A's stored positions, and on the diagonal when A has one."""
        with _quiet_beta():
            pattern = torch.sparse_csr_tensor(
                self.crow, self.col, torch.zeros_like(self.values), (self.n, self.n), check_invariants=False
            )
        vals = torch.sparse.sampled_addmm(pattern, a, b.t(), beta=0.0).values()
        diag = (a * b).sum(1) if self.diag is not None else None
        return vals, diag
