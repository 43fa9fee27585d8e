"""The Node sampler of GraphSAINT: ``budget`` draws with replacement, node set = the distinct draws.

GraphSAINT's node sampler draws ``v`` with probability proportional to
``||A[:, v]||^2``; on the unweighted adjacency that is ``deg(v)``, which is
what its reference implementation uses. Isolated nodes are never drawn; on a
graph with no edge at all every node gets the same weight.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.alias import build_alias, draw_alias
from saintpipe.services.sampler.kernels.dependent import alias_draw, slot_seed
from saintpipe.services.sampler.kernels.select import take


def build_node_table(indptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The alias table over nodes with weights ``deg(v)`` (uniform on an edgeless graph)."""
    weights = np.diff(indptr).astype(np.float64)
    if weights.sum() <= 0:
        weights[:] = 1.0
    thresh = np.empty(weights.size, dtype=np.uint32)
    alias = np.empty(weights.size, dtype=np.int32)
    build_alias(weights, thresh, alias)
    return thresh, alias


@njit(cache=True)
def node_select(thresh, alias, budget, state, g2l, sel):
    """Draw ``budget`` nodes and return the number of distinct ones written to ``sel``."""
    count = 0
    for _ in range(budget):
        count = take(draw_alias(state, thresh, alias), g2l, sel, count)
    return count


@njit(cache=True)
def node_select_dependent(thresh, alias, budget, chain, step, kappa, g2l, sel):
    """:func:`node_select` with dependent variates (``kernels.dependent``): draw ``j`` is slot ``j``."""
    c, t, k = np.uint64(chain), np.uint64(step), np.uint64(kappa)
    count = 0
    for j in range(budget):
        v, _ = alias_draw(slot_seed(c, np.uint64(j), t, k), thresh, alias)
        count = take(v, g2l, sel, count)
    return count
