"""Frontier sampling (GraphSAINT Algorithm 2): on a sum tree (the default) or on the Dashboard (Algorithms 3, 4).

The sampled node set follows Algorithm 2: the initial frontier (m distinct
nodes drawn uniformly) plus every node popped in the ``n - m`` iterations.
The frontier is a multiset of m walkers (a replacement may already be in the
frontier), which is the m-dimensional random walk of Ribeiro and Towsley that
Section 4.3 describes. Two kernels draw the pops, with the same law:

* :func:`frontier_select_tree` (``dashboard = "tree"``, the default) keeps
  the walkers' degrees in a Fenwick tree (``kernels/sumtree.py``): one
  descent per pop, one update per replacement, O(log m) in 8 KiB that stay in
  L1, whatever the degrees.
* :func:`frontier_select` (``dashboard = "pins"``) is the paper's Dashboard:
  ``deg(v)`` pins per node added, uniform probes that retry on historical
  pins, and a cleanup whenever the pins fill it. Probing draws uniformly from
  the *used* prefix ``db[:ia_start[cnt]]`` rather than from the whole array:
  the slots past it hold no pins, so excluding them changes no probability and
  saves probes. Cleanup happens when the next node's pins do not fit in the
  free slots (Algorithm 3 line 23) or when IA has no column left. When a
  node's degree exceeds the free slots even after a cleanup (the corner case
  of Section 4.3), it gets all the remaining slots and the dashboard is not
  enlarged; ``stats[STAT_CLAMPED]`` counts those events.

Why the tree is the default: the nodes added are random neighbours, whose mean degree (the
degree-weighted mean) grows with a skewed graph's tail; the Dashboard's pins and cleanups grow with it,
the tree's work does not (docs/explanation/decisions.md, "The frontier on a sum tree").

A frontier node's replacement (a uniform neighbour, Algorithm 2 line 6) is drawn when the node joins the
frontier, not when it is popped: the same law, but the memory it will read is known early (see
``LOOKAHEAD``), which matters once ``indices`` is far larger than the caches (docs/benchmarks/kernels.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.dashboard import NULL, add_to_frontier, cleanup, fill_pins
from saintpipe.services.sampler.kernels.prefetch import prefetch
from saintpipe.services.sampler.kernels.rng import bounded
from saintpipe.services.sampler.kernels.select import take, uniform_subset
from saintpipe.services.sampler.kernels.sumtree import add, build, find, top_bit

STAT_POPS = 0
STAT_PROBES = 1
STAT_CLEANUPS = 2
STAT_CLAMPED = 3
NUM_STATS = 4


# How many iterations after a node joined the frontier its replacement's indptr entry is asked for: by then
# the line of ``indices`` naming the replacement (asked for when the node joined) has arrived.
LOOKAHEAD = 8


@njit(cache=True, nogil=True, inline="always")
def _draw_replacement(indptr, indices, state, v):
    """The CSR position of the neighbour that will replace ``v`` when it is popped (-1 without neighbours).

    Drawn when ``v`` joins the frontier rather than when it leaves: the draw
    is independent of everything between, so the law of Algorithm 2 is
    unchanged, and the line of ``indices`` holding the replacement can be
    fetched while ``v`` waits in the frontier. On a graph larger than the
    caches, reading it at the pop was a miss that stalled every iteration.
    """
    row = indptr[v]
    deg = indptr[v + 1] - row
    if deg == 0:
        return np.int64(-1)
    position = row + bounded(state, deg)
    prefetch(indices, position)
    return position


@njit(cache=True, nogil=True, inline="always")
def _join(indptr, indices, state, v, t, it, tile_next, pending):
    """``v`` joins the frontier as walker ``t`` in iteration ``it``: draw its replacement now, and ask for the
    ``indptr`` entry of the replacement drawn ``LOOKAHEAD`` iterations ago, whose line of ``indices`` has
    arrived by now."""
    position = _draw_replacement(indptr, indices, state, v)
    tile_next[t] = position
    slot = it % LOOKAHEAD
    earlier = pending[slot]
    if earlier >= 0:
        prefetch(indptr, indices[earlier])
    pending[slot] = position


@njit(cache=True, nogil=True)
def frontier_select(indptr, indices, m, n, state, bits, sel, frontier, cap, db, db_new, ia_start, ia_valid,
                    ia_tile, tile_node, tile_start, tile_stop, tile_ia, tile_next, pending, stats):
    """Select the node set of one frontier-sampled subgraph on the Dashboard; returns the size of ``sel``.

    Args:
        indptr, indices: the full graph (CSR).
        m: frontier size, ``1 <= m <= N``; n: node budget (iterations = ``n - m``).
        state: the random stream. bits, sel: the marked node set (see ``select``).
        frontier: int32 [m] scratch for the initial frontier.
        cap: the dashboard's length (slots).
        db, db_new: the pins and their cleanup target, ``cap`` long.
        ia_start (int64 [c + 1]), ia_valid (uint8 [c + 1]), ia_tile (int32 [c]): the index array.
        tile_*: the m tiles; ``tile_next`` (int64 [m]) holds each frontier node's replacement, drawn ahead
            (see :func:`_draw_replacement`). pending: int64 [LOOKAHEAD] scratch.
        stats: int64 [NUM_STATS], overwritten.
    """
    ia_cap = ia_tile.size
    for s in range(NUM_STATS):
        stats[s] = 0
    count = uniform_subset(state, indptr.size - 1, m, bits, sel, 0, frontier)

    # Algorithm 3 lines 7-18: IA and the dashboard from the initial frontier.
    ia_start[0] = 0
    valid = np.int64(0)
    for i in range(m):
        v = frontier[i]
        deg = indptr[v + 1] - indptr[v]
        pins = min(deg, cap - ia_start[i])
        if pins < deg:
            stats[STAT_CLAMPED] += 1
        add_to_frontier(v, i, pins, i, db, ia_start, ia_valid, ia_tile, tile_node, tile_start, tile_stop, tile_ia)
        tile_next[i] = _draw_replacement(indptr, indices, state, v)
        valid += pins
    for i in range(m):
        if tile_next[i] >= 0:
            prefetch(indptr, indices[tile_next[i]])
    for k in range(LOOKAHEAD):
        pending[k] = -1
    cnt = m

    # Algorithm 3 lines 20-30, with Algorithm 2's node set (line 7: the popped node joins V_s).
    for it in range(n - m):
        if valid == 0:
            break  # every frontier node is isolated (or got no slot): nothing can be popped
        used = ia_start[cnt]
        # POP_FRONTIER: probe until a valid pin; expected used / valid <= eta probes.
        t = NULL
        while t == NULL:
            t = db[bounded(state, used)]
            stats[STAT_PROBES] += 1
        v_pop = tile_node[t]
        start = tile_start[t]
        stop = tile_stop[t]
        fill_pins(db, start, stop, NULL)
        ia_valid[tile_ia[t]] = 0
        valid -= stop - start
        stats[STAT_POPS] += 1
        count = take(v_pop, bits, sel, count)

        v_new = indices[tile_next[t]]  # a popped node has pins, so it has neighbours
        deg = indptr[v_new + 1] - indptr[v_new]
        if deg > cap - used or cnt + 1 >= ia_cap:
            cnt = cleanup(db, db_new, ia_start, ia_valid, ia_tile, cnt, tile_start, tile_stop, tile_ia)
            db, db_new = db_new, db
            stats[STAT_CLEANUPS] += 1
        pins = min(deg, cap - ia_start[cnt])
        if pins < deg:
            stats[STAT_CLAMPED] += 1
        add_to_frontier(v_new, t, pins, cnt, db, ia_start, ia_valid, ia_tile, tile_node, tile_start, tile_stop,
                        tile_ia)
        _join(indptr, indices, state, v_new, t, it, tile_next, pending)
        valid += pins
        cnt += 1
    return count


@njit(cache=True, nogil=True)
def frontier_select_tree(indptr, indices, m, n, state, bits, sel, frontier, weights, tree, tile_next, pending,
                         stats):
    """:func:`frontier_select`'s node set, with the frontier's degrees in a sum tree instead of a dashboard.

    Walker ``i`` (``frontier[i]``, its weight ``weights[i]`` its degree) is
    drawn by one descent of the tree (``kernels/sumtree.py``): probability
    ``deg(u) / sum(deg(FS))``, Algorithm 2 line 5, with no rejected probe and
    no cleanup, and replaced by one update. Args as :func:`frontier_select`
    without the dashboard, plus ``weights`` (int64 [m]) and ``tree`` (int64
    [m + 1]) scratch.
    """
    for s in range(NUM_STATS):
        stats[s] = 0
    count = uniform_subset(state, indptr.size - 1, m, bits, sel, 0, frontier)
    for i in range(m):
        v = frontier[i]
        weights[i] = indptr[v + 1] - indptr[v]
        tile_next[i] = _draw_replacement(indptr, indices, state, v)
    total = build(weights, m, tree)
    for i in range(m):
        if tile_next[i] >= 0:
            prefetch(indptr, indices[tile_next[i]])
    for k in range(LOOKAHEAD):
        pending[k] = -1
    top = top_bit(m)

    for it in range(n - m):
        if total == 0:
            break  # every frontier node is isolated: nothing can be popped
        t = find(tree, m, top, bounded(state, total))
        stats[STAT_PROBES] += 1
        stats[STAT_POPS] += 1
        count = take(frontier[t], bits, sel, count)

        v_new = indices[tile_next[t]]  # a popped node has weight > 0, so it has neighbours
        deg = indptr[v_new + 1] - indptr[v_new]
        add(tree, m, t, deg - weights[t])
        total += deg - weights[t]
        weights[t] = deg
        frontier[t] = v_new
        _join(indptr, indices, state, v_new, t, it, tile_next, pending)
    return count
