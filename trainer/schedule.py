"""The matmul-order scheduler (section 6.1 of the GraphSAINT parallel-training paper).

Every graph layer multiplies a chain of three matrices, A·X·W, with A sparse
(``nnz`` stored entries, n×n), X dense (n×f_in) and W dense (f_in×f_out). Its
forward pass and both gradients can each be computed in two orders:

=============  ==========================  ==========================
product        ``ax_first`` (sparse first)  ``xw_first`` (dense first)
=============  ==========================  ==========================
Y = A X W      (A X) W                     A (X W)
dW = Xᵀ Aᵀ G   (A X)ᵀ G                    Xᵀ (Aᵀ G)
dX = Aᵀ G Wᵀ   (Aᵀ G) Wᵀ                   Aᵀ (G Wᵀ)
=============  ==========================  ==========================

When A itself is learned (GAT attention), dA = G (X W)ᵀ sampled on A's pattern
is a fourth product, computed from X W (``xw``) or from G Wᵀ (``gw``).

The four products share four intermediates: P = A X, Q = X W, R = Aᵀ G and
S = G Wᵀ; an intermediate is paid for once however many products use it (the
forward pass keeps P or Q for the backward pass when a gradient reuses it). The
paper's rule, "order 1 if f_in < f_out, else order 2, and the transposed choice
for dX", is what minimizing the total multiply-accumulate (MAC) count gives;
:func:`choose_order` enumerates all plans and takes the cheapest, so it also
covers the cases the rule does not (no dX for the first layer, learned A).

Everything here is a pure function of shapes; :class:`Scheduler` only adds the
"log each plan once" bookkeeping.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

log = logging.getLogger(__name__)

AX_FIRST: Final = "ax_first"
XW_FIRST: Final = "xw_first"
Order = Literal["ax_first", "xw_first"]
ValueOrder = Literal["xw", "gw"]
ORDERS: tuple[Order, Order] = (AX_FIRST, XW_FIRST)


@dataclass(frozen=True)
class ChainShape:
    """Shapes of one A·X·W product.

    Attributes:
        n: rows (= columns) of A.
        nnz: multiply-accumulates of one sparse row pass per output column: the
            stored entries of A, plus n when A carries a separate diagonal.
        f_in: columns of X.
        f_out: columns of W.
        x_grad: whether dX is needed (False for the first layer's input features).
        values_grad: whether dA is needed (A is learned, e.g. GAT attention).
        backward: whether any gradient is needed (False under ``torch.no_grad``:
            only the forward order matters then).
    """

    n: int
    nnz: int
    f_in: int
    f_out: int
    x_grad: bool = True
    values_grad: bool = False
    backward: bool = True


@dataclass(frozen=True)
class ChainPlan:
    """The order of each product of one chain (``None``: product not computed)."""

    forward: Order
    grad_w: Order | None
    grad_x: Order | None
    grad_values: ValueOrder | None

    @property
    def keep_p(self) -> bool:
        """Forward keeps A·X for the backward pass."""
        return self.forward == AX_FIRST and self.grad_w == AX_FIRST

    @property
    def keep_q(self) -> bool:
        """Forward keeps X·W for the backward pass."""
        return self.forward == XW_FIRST and self.grad_values == "xw"

    def describe(self) -> str:
        parts = [f"Y={'(AX)W' if self.forward == AX_FIRST else 'A(XW)'}"]
        if self.grad_w:
            parts.append(f"dW={'(AX)ᵀG' if self.grad_w == AX_FIRST else 'Xᵀ(AᵀG)'}")
        if self.grad_x:
            parts.append(f"dX={'(AᵀG)Wᵀ' if self.grad_x == AX_FIRST else 'Aᵀ(GWᵀ)'}")
        if self.grad_values:
            parts.append(f"dA={'G∘(XW)' if self.grad_values == 'xw' else '(GWᵀ)∘X'}")
        return " ".join(parts)


@dataclass(frozen=True)
class MacCount:
    """Multiply-accumulates of a plan, split into dense (GEMM) and sparse (SpMM/SDDMM) work."""

    dense: int
    sparse: int

    @property
    def total(self) -> int:
        return self.dense + self.sparse

    def __add__(self, other: MacCount) -> MacCount:
        return MacCount(self.dense + other.dense, self.sparse + other.sparse)


def macs(shape: ChainShape, plan: ChainPlan) -> MacCount:
    """MACs of the forward pass plus the requested gradients of one chain under ``plan``.

    Each intermediate (P = AX, Q = XW, R = AᵀG, S = GWᵀ) is counted once.
    """
    n, e, fi, fo = shape.n, shape.nnz, shape.f_in, shape.f_out
    intermediate = {
        "P": MacCount(0, e * fi),
        "Q": MacCount(n * fi * fo, 0),
        "R": MacCount(0, e * fo),
        "S": MacCount(n * fo * fi, 0),
    }
    needed: set[str] = set()
    total = MacCount(0, 0)
    if plan.forward == AX_FIRST:
        needed.add("P")
        total += MacCount(n * fi * fo, 0)
    else:
        needed.add("Q")
        total += MacCount(0, e * fo)
    if plan.grad_w is not None:
        needed.add("P" if plan.grad_w == AX_FIRST else "R")
        total += MacCount(n * fi * fo, 0)
    if plan.grad_x == AX_FIRST:
        needed.add("R")
        total += MacCount(n * fo * fi, 0)
    elif plan.grad_x == XW_FIRST:
        needed.add("S")
        total += MacCount(0, e * fi)
    if plan.grad_values == "xw":
        needed.add("Q")
        total += MacCount(0, e * fo)
    elif plan.grad_values == "gw":
        needed.add("S")
        total += MacCount(0, e * fi)
    for name in sorted(needed):
        total += intermediate[name]
    return total


def all_plans(shape: ChainShape) -> list[ChainPlan]:
    """Every plan that computes exactly the products ``shape`` asks for."""
    if not shape.backward:
        return [ChainPlan(f, None, None, None) for f in ORDERS]
    grad_x: tuple[Order | None, ...] = ORDERS if shape.x_grad else (None,)
    grad_v: tuple[ValueOrder | None, ...] = ("xw", "gw") if shape.values_grad else (None,)
    return [ChainPlan(f, w, x, v) for f, w, x, v in itertools.product(ORDERS, ORDERS, grad_x, grad_v)]


@lru_cache(maxsize=4096)
def choose_order(shape: ChainShape, order: str = "auto") -> ChainPlan:
    """The plan for one chain: cheapest by MACs, or forced to one order.

    Args:
        shape: the chain's shapes.
        order: ``auto`` (fewest MACs), or ``ax_first`` / ``xw_first`` to force the forward pass and both
            gradients to that order (dA, when needed, still takes the cheaper of its two forms).

    Returns:
        The chosen :class:`ChainPlan`; ties go to the sparse-first order.
    """
    plans = all_plans(shape)
    if order != "auto":
        if order not in ORDERS:
            raise ValueError(f"unknown matmul order {order!r} (auto, ax_first, xw_first)")
        plans = [
            p for p in plans if p.forward == order and p.grad_w in (order, None) and p.grad_x in (order, None)
        ]
    return min(plans, key=lambda p: macs(shape, p).total)


# --- MixHop (eq. 5): ‖_k Â^k X W_k, one plan per layer -------------------------------------------


@dataclass(frozen=True)
class MixHopShape:
    """Shapes of one MixHop layer: powers k of Â, each with its own W_k (f_in × f_out)."""

    n: int
    nnz: int
    f_in: int
    f_out: int
    powers: tuple[int, ...]
    x_grad: bool = True
    backward: bool = True


def mixhop_macs(shape: MixHopShape, order: Order) -> MacCount:
    """MACs of forward plus backward of a MixHop layer.

    ``ax_first`` propagates X through the shared chain Â X, Â² X, … (the paper's ``Â(ÂX)``) and multiplies
    each power by its W_k; the backward pass runs the chain transposed once. ``xw_first`` multiplies X by all
    W_k in one GEMM and propagates the narrow products, power k through k hops.
    """
    n, e, fi, fo = shape.n, shape.nnz, shape.f_in, shape.f_out
    kmax, count = max(shape.powers), len(shape.powers)
    dense_per_gemm = n * fi * fo * count
    gemms = 1 + shape.backward + (shape.backward and shape.x_grad)  # forward, dW, dX
    if order == AX_FIRST:
        chain = kmax * e * fi
        return MacCount(gemms * dense_per_gemm, chain * (2 if shape.backward and shape.x_grad else 1))
    hops = sum(shape.powers) * e * fo
    return MacCount(gemms * dense_per_gemm, hops * (2 if shape.backward else 1))


@lru_cache(maxsize=4096)
def choose_mixhop_order(shape: MixHopShape, order: str = "auto") -> Order:
    """``ax_first`` or ``xw_first`` for a MixHop layer: cheapest by MACs unless forced."""
    if order in ORDERS:
        return order
    if order != "auto":
        raise ValueError(f"unknown matmul order {order!r} (auto, ax_first, xw_first)")
    return min(ORDERS, key=lambda o: mixhop_macs(shape, o).total)


class Scheduler:
    """Chooses plans and logs each distinct plan once per layer and widths.

    Subgraphs differ in n and nnz from step to step, but the decision rarely
    changes, so the log key is (layer, f_in, f_out, which gradients, plan):
    a line appears when a layer first uses a plan, not on every step.
    """

    def __init__(self, order: str = "auto") -> None:
        if order not in ("auto", *ORDERS):
            raise ValueError(f"unknown matmul order {order!r} (auto, ax_first, xw_first)")
        self.order = order
        self._logged: set[tuple] = set()
        self._lock = threading.Lock()

    def chain(self, layer: str, shape: ChainShape) -> ChainPlan:
        plan = choose_order(shape, self.order)
        self._log_once(
            (layer, shape.f_in, shape.f_out, shape.x_grad, shape.values_grad, plan),
            "%s: f_in=%d f_out=%d -> %s (%s; %.3g MACs at n=%d nnz=%d)",
            layer,
            shape.f_in,
            shape.f_out,
            plan.describe(),
            self.order,
            macs(shape, plan).total,
            shape.n,
            shape.nnz,
        )
        return plan

    def mixhop(self, layer: str, shape: MixHopShape) -> Order:
        order = choose_mixhop_order(shape, self.order)
        self._log_once(
            (layer, shape.f_in, shape.f_out, shape.powers, shape.x_grad, order),
            "%s: mixhop powers=%s f_in=%d f_out=%d -> %s (%s; %.3g MACs at n=%d nnz=%d)",
            layer,
            list(shape.powers),
            shape.f_in,
            shape.f_out,
            order,
            self.order,
            mixhop_macs(shape, order).total,
            shape.n,
            shape.nnz,
        )
        return order

    def _log_once(self, key: tuple, msg: str, *args: object) -> None:
        with self._lock:
            if key in self._logged:
                return
            self._logged.add(key)
        log.info("matmul order " + msg, *args)
