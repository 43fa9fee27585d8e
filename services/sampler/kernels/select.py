"""Helpers every node-selection kernel shares: the marked node set and uniform subsets.

A node-selection kernel writes the distinct sampled global ids into ``sel``
and marks each one in ``g2l`` (the per-sampler global-to-local map, ``-1``
everywhere between calls) with :data:`SELECTED`. Induction then overwrites the
marks with local ids and finally resets exactly the touched entries, so no
call allocates or clears anything proportional to the full graph.
"""

from __future__ import annotations

from numba import njit

from saintpipe.services.sampler.kernels.rng import bounded

ABSENT = -1
SELECTED = -2


@njit(cache=True)
def take(v, g2l, sel, count):
    """Add node ``v`` to the sampled set unless it is there already; returns the new count."""
    if g2l[v] == ABSENT:
        g2l[v] = SELECTED
        sel[count] = v
        return count + 1
    return count


@njit(cache=True)
def uniform_subset(state, num_nodes, k, g2l, sel, count, out):
    """Draw ``k <= num_nodes`` distinct nodes uniformly (Floyd's algorithm, O(k)).

    The nodes are written to ``out[:k]``, added to the sampled set (``sel``,
    marked in ``g2l``) and the new set size is returned. ``g2l`` doubles as
    Floyd's membership test, so no set structure is allocated; the set must
    not hold any node before the call.
    """
    j = 0
    for top in range(num_nodes - k, num_nodes):
        t = bounded(state, top + 1)
        if g2l[t] != ABSENT:
            t = top
        g2l[t] = SELECTED
        sel[count] = t
        count += 1
        out[j] = t
        j += 1
    return count


@njit(cache=True)
def unmark(g2l, sel, start, stop):
    """Reset the marks of ``sel[start:stop]``."""
    for i in range(start, stop):
        g2l[sel[i]] = ABSENT
