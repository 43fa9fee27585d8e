"""Frontier sampling (GraphSAINT Algorithm 2) on the Dashboard (Algorithms 3 and 4).

The sampled node set follows Algorithm 2: the initial frontier (m distinct
nodes drawn uniformly) plus every node popped in the ``n - m`` iterations.
The frontier is a multiset of m walkers (a replacement may already be in the
frontier), which is the m-dimensional random walk of Ribeiro and Towsley that
Section 4.3 describes.

Probing draws uniformly from the *used* prefix ``db[:ia_start[cnt]]`` rather
than from the whole array: the slots past it hold no pins, so excluding them
changes no probability and saves probes. Cleanup happens when the next node's
pins do not fit in the free slots (Algorithm 3 line 23) or when IA has no
column left. When a node's degree exceeds the free slots even after a cleanup
(the corner case of Section 4.3), it gets all the remaining slots and the
dashboard is not enlarged; ``stats[STAT_CLAMPED]`` counts those events.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels.dashboard import NULL, add_to_frontier, cleanup, fill_pins
from saintpipe.services.sampler.kernels.rng import bounded
from saintpipe.services.sampler.kernels.select import take, uniform_subset

STAT_POPS = 0
STAT_PROBES = 1
STAT_CLEANUPS = 2
STAT_CLAMPED = 3
NUM_STATS = 4


@njit(cache=True)
def frontier_select(indptr, indices, m, n, state, bits, sel, frontier,
                    db, db_new, ia_start, ia_valid, ia_tile, tile_node, tile_start, tile_stop, tile_ia,
                    stats):
    """Select the node set of one frontier-sampled subgraph; returns how many nodes are in ``sel``.

    Args:
        indptr, indices: the full graph (CSR).
        m: frontier size, ``1 <= m <= N``; n: node budget (iterations = ``n - m``).
        state: the random stream. bits, sel: the marked node set (see ``select``).
        frontier: int32 [m] scratch for the initial frontier.
        db, db_new: the dashboard and its cleanup target, same length (the capacity).
        ia_start (int64 [c + 1]), ia_valid (uint8 [c + 1]), ia_tile (int32 [c]): the index array.
        tile_*: the m tiles. stats: int64 [NUM_STATS], overwritten.
    """
    cap = db.size
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
        add_to_frontier(v, i, pins, i, db, ia_start, ia_valid, ia_tile,
                        tile_node, tile_start, tile_stop, tile_ia)
        valid += pins
    cnt = m

    # Algorithm 3 lines 20-30, with Algorithm 2's node set (line 7: the popped node joins V_s).
    for _ in range(n - m):
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

        row = indptr[v_pop]
        v_new = indices[row + bounded(state, indptr[v_pop + 1] - row)]
        deg = indptr[v_new + 1] - indptr[v_new]
        if deg > cap - ia_start[cnt] or cnt + 1 >= ia_cap:
            cnt = cleanup(db, db_new, ia_start, ia_valid, ia_tile, cnt, tile_start, tile_stop, tile_ia)
            db, db_new = db_new, db
            stats[STAT_CLEANUPS] += 1
        pins = min(deg, cap - ia_start[cnt])
        if pins < deg:
            stats[STAT_CLAMPED] += 1
        add_to_frontier(v_new, t, pins, cnt, db, ia_start, ia_valid, ia_tile,
                        tile_node, tile_start, tile_stop, tile_ia)
        valid += pins
        cnt += 1
    return count
