"""Frontier sampling with dependent variates: Algorithm 2 as m walkers racing in continuous time.

The Dashboard (``kernels.frontier``) draws from one random stream whose
meaning shifts with the dashboard's layout, so a single changed draw changes
every later one. For ``kappa > 1`` the same law is drawn another way, in which
each walker owns its randomness (one slot of ``kernels.dependent`` per walker):

* the initial frontier: walker ``k`` draws uniform nodes from its stream until
  one is not taken by walkers ``0..k-1``; sequential draws without replacement
  give a uniform m-subset, as Floyd's algorithm does;
* the pops: every walker holds an exponential clock of rate ``deg(v)`` for the
  node ``v`` it stands on (rate 0, never, on an isolated node). The walker
  whose clock rings first pops its node, which joins the node set, and moves
  to a uniform neighbour, drawing its next clock. By memorylessness the next
  walker to ring is walker ``k`` with probability ``deg(v_k) / sum_j
  deg(v_j)``: exactly Algorithm 2's pop, the Dashboard's probe law. The first
  ``n - m`` rings are the ``n - m`` iterations.

A walker whose slot did not switch follows the same path at the same times as
at the previous step of the chain, so consecutive subgraphs share most of
their nodes. The clocks sit in a binary min-heap of the m walkers (arrays
preallocated once per sampler): O((n - m) log m) per subgraph, no dashboard.
(The Dashboard's corner case, a node given fewer pins than its degree, does
not arise here: this is Algorithm 2's law without it.)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.services.sampler.kernels import dependent
from saintpipe.services.sampler.kernels.select import is_marked, take


@njit(cache=True, nogil=True, inline="always")
def _clock(x, indptr, v):
    """The time to a walker's next pop on node ``v``: Exp(deg(v)), infinite on an isolated node."""
    deg = indptr[v + 1] - indptr[v]
    e, x = dependent.exponential(x)
    if deg == 0:
        return np.inf, x
    return e / deg, x


@njit(cache=True, nogil=True)
def frontier_select_dependent(indptr, indices, m, n, chain, step, kappa, bits, sel,
                              walker_node, walker_state, heap_time, heap_walker, stats):
    """Select the node set of one frontier subgraph from the walkers' slots; returns the set size.

    Args:
        indptr, indices: the full graph (CSR). m: walkers, ``1 <= m <= N``; n: node budget.
        chain, step, kappa: the dependent chain (see ``kernels.dependent``).
        bits, sel: the marked node set (see ``select``).
        walker_node (int32 [m]), walker_state (uint64 [m]), heap_time (float64 [m]), heap_walker (int32 [m]):
            scratch. stats: int64 [4] as ``frontier_select``'s (pops; no probes, cleanups or clamps).
    """
    num_nodes = indptr.size - 1
    c, t, k = np.uint64(chain), np.uint64(step), np.uint64(kappa)
    for s in range(stats.size):
        stats[s] = 0
    count = 0
    for w in range(m):
        x = dependent.slot_seed(c, np.uint64(w), t, k)
        v, x = dependent.bounded(x, num_nodes)
        while is_marked(bits, v):  # taken by an earlier walker: draw again (without replacement)
            v, x = dependent.bounded(x, num_nodes)
        count = take(v, bits, sel, count)
        walker_node[w] = v
        heap_time[w], x = _clock(x, indptr, v)
        heap_walker[w] = w
        walker_state[w] = x
    for i in range(m // 2 - 1, -1, -1):
        dependent.sift_down(heap_time, heap_walker, i, m)
    for _ in range(n - m):
        now = heap_time[0]
        if now == np.inf:
            break  # every walker stands on an isolated node: nothing can be popped
        w = heap_walker[0]
        v = walker_node[w]
        count = take(v, bits, sel, count)
        stats[0] += 1
        x = walker_state[w]
        row = indptr[v]
        b, x = dependent.bounded(x, indptr[v + 1] - row)
        v_new = indices[row + b]
        wait, x = _clock(x, indptr, v_new)
        walker_node[w] = v_new
        walker_state[w] = x
        heap_time[0] = now + wait
        dependent.sift_down(heap_time, heap_walker, 0, m)
    return count
