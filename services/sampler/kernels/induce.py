"""From a sampled node set to the finished subgraph, straight into CSR (no COO detour).

Steps, in one kernel call: node clipping (GraphSAINT section 6.2), sorting the
node ids, the global-to-local map, induction row by row (FastSample's fused
CSR construction: each kept neighbour is appended to its row as the row is
scanned, so ``indptr`` comes for free), the aggregator weights, the
transposed weights by Algorithm 6 and the loss weights. The map is reset for
exactly the nodes it touched, so nothing proportional to the full graph is
allocated or cleared per subgraph.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from services.sampler.kernels.rng import bounded
from services.sampler.kernels.select import ABSENT, unmark

STATUS_OK = 0
STATUS_ASYMMETRIC = 1


@njit(cache=True)
def clip_nodes(state, g2l, sel, count, multiple):
    """Drop ``count % multiple`` random nodes of ``sel[:count]`` (section 6.2); returns the first kept index.

    A partial Fisher-Yates shuffle moves the dropped nodes to the front. Sets
    smaller than ``multiple`` (and ``multiple <= 1``) are kept whole: clipping
    them would leave nothing.
    """
    if multiple <= 1 or count < multiple:
        return 0
    drop = count % multiple
    for i in range(drop):
        j = i + bounded(state, count - i)
        tmp = sel[i]
        sel[i] = sel[j]
        sel[j] = tmp
    unmark(g2l, sel, 0, drop)
    return drop


@njit(cache=True)
def induce_csr(indptr, indices, g2l, bits, node_ids, want_eids):
    """The induced CSR of ``node_ids`` (sorted) whose ``g2l`` entries hold their local ids.

    ``bits`` (uint8 [ceil(N/8)], all zero) is a membership bitset set here for
    the subgraph's nodes and cleared before returning. Most neighbours scanned
    are not in the subgraph; the bitset answers that from a few hundred KiB
    that stay in cache, where ``g2l`` (4 bytes per node) would miss cache on
    large graphs. Only members then read ``g2l``.

    Returns ``(sub_indptr int64 [n+1], sub_indices int32 [e], eids int64)``
    where, with ``want_eids``, ``eids[k]`` is the full-graph CSR position of
    entry ``k`` (empty otherwise). Because the full graph's rows are sorted
    and local ids follow global order, every induced row comes out sorted.
    """
    n = node_ids.size
    bound = np.int64(0)
    for i in range(n):
        v = node_ids[i]
        bits[v >> 3] |= np.uint8(1 << (v & 7))
        bound += indptr[v + 1] - indptr[v]
    sub_indptr = np.empty(n + 1, dtype=np.int64)
    sub_indptr[0] = 0
    tmp_idx = np.empty(bound, dtype=np.int32)
    tmp_eid = np.empty(bound if want_eids else 0, dtype=np.int64)
    e = np.int64(0)
    if want_eids:
        for i in range(n):
            v = node_ids[i]
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                if (bits[u >> 3] >> (u & 7)) & 1:
                    tmp_idx[e] = g2l[u]
                    tmp_eid[e] = k
                    e += 1
            sub_indptr[i + 1] = e
    else:
        for i in range(n):
            v = node_ids[i]
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                if (bits[u >> 3] >> (u & 7)) & 1:
                    tmp_idx[e] = g2l[u]
                    e += 1
            sub_indptr[i + 1] = e
    for i in range(n):
        bits[node_ids[i] >> 3] = 0
    return sub_indptr, tmp_idx[:e].copy(), tmp_eid[:e].copy() if want_eids else tmp_eid


@njit(cache=True)
def transpose_weights(sub_indptr, sub_indices, weights, weights_t):
    """Algorithm 6: the data array of the transpose, by one pass over the CSR.

    Row ``v``'s entry ``(v, u)`` carries the transpose's weight at ``(u, v)``,
    which sits at the next free slot of row ``u`` because rows are sorted. The
    pattern must be symmetric: each slot written is checked to hold column
    ``v``. Returns ``-1`` on success, else the local row whose entry broke it.
    """
    n = sub_indptr.size - 1
    ptr = sub_indptr[:n].copy()
    for v in range(n):
        for j in range(sub_indptr[v], sub_indptr[v + 1]):
            u = sub_indices[j]
            p = ptr[u]
            if p >= sub_indptr[u + 1] or sub_indices[p] != v:
                return v
            weights_t[p] = weights[j]
            ptr[u] = p + 1
    return -1


@njit(cache=True)
def finish_subgraph(indptr, indices, g2l, bits, sel, count, clip_multiple, state,
                    alpha, train_mask, loss_coef, want_eids):
    """Clip, sort, induce, weight and transpose one sampled node set; resets ``g2l``.

    Args:
        indptr, indices: the full graph. g2l, sel, count: the marked node set.
        bits: the zeroed membership bitset (see :func:`induce_csr`).
        clip_multiple: node clipping multiple (``0`` for none). state: the random stream.
        alpha: float32 [E] aggregator coefficients, or empty for plain mean aggregation.
        train_mask: uint8 [N] (1 = training node), or empty when every node trains.
        loss_coef: float32 [N] loss coefficients, or empty for uniform loss weights.
        want_eids: also return the full-graph CSR position of every entry (else an empty ``eids``).

    Returns:
        ``(status, bad_row, node_ids, sub_indptr, sub_indices, eids, weights, weights_t, loss)``.
        ``status`` is ``STATUS_ASYMMETRIC`` (with the local ``bad_row``) when the
        induced pattern is not symmetric, i.e. the graph is directed.
    """
    first = clip_nodes(state, g2l, sel, count, clip_multiple)
    node_ids = np.sort(sel[first:count]).astype(np.int64)
    n = node_ids.size
    for i in range(n):
        g2l[node_ids[i]] = i
    want_eids = want_eids or alpha.size > 0
    sub_indptr, sub_indices, eids = induce_csr(indptr, indices, g2l, bits, node_ids, want_eids)
    for i in range(n):
        g2l[node_ids[i]] = ABSENT

    e = sub_indices.size
    weights = np.empty(e, dtype=np.float32)
    for i in range(n):
        start = sub_indptr[i]
        stop = sub_indptr[i + 1]
        if stop == start:
            continue
        if alpha.size > 0:
            # GraphSAINT: the full graph's mean aggregator 1/deg(v), divided by alpha(u, v).
            v = node_ids[i]
            inv_deg = 1.0 / (indptr[v + 1] - indptr[v])
            for k in range(start, stop):
                weights[k] = inv_deg / alpha[eids[k]]
        else:
            w = np.float32(1.0 / (stop - start))
            for k in range(start, stop):
                weights[k] = w
    weights_t = np.empty(e, dtype=np.float32)
    bad_row = transpose_weights(sub_indptr, sub_indices, weights, weights_t)
    status = STATUS_OK if bad_row < 0 else STATUS_ASYMMETRIC

    loss = np.zeros(n, dtype=np.float32)
    if loss_coef.size > 0:
        for i in range(n):
            v = node_ids[i]
            if train_mask.size == 0 or train_mask[v]:
                loss[i] = loss_coef[v]
    elif train_mask.size > 0:
        num_train = 0
        for i in range(n):
            num_train += train_mask[node_ids[i]]
        if num_train > 0:
            w = np.float32(1.0 / num_train)
            for i in range(n):
                if train_mask[node_ids[i]]:
                    loss[i] = w
    elif n > 0:
        loss[:] = np.float32(1.0 / n)
    return status, bad_row, node_ids, sub_indptr, sub_indices, eids, weights, weights_t, loss
