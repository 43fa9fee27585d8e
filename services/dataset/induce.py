"""The induction a trainer does for a node set from the pool (wire ``nodes``): CSR, weights, loss weights.

One Numba kernel, :func:`expand_node_set`, called by
:class:`saintpipe.services.dataset.expand.SubgraphExpander`. The sampler's
kernels (services/sampler/kernels/induce.py: ``induce_scan``,
``complete_subgraph``, ``transpose_weights``) computed these arrays when the
subgraph was drawn; trainers may not import them (they read subgraphs only
through the pool's client), so this kernel does the same arithmetic in the
same order, and tests/unit/dataset/test_dataset_expand.py checks the result
bit for bit against the sampler's, for every sampler kind. Hot loops index
with uint64, which spares Numba's negative-index wraparound, as there.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)
EXPAND_OK = -1


@njit(cache=True)
def expand_node_set(indptr, indices, node_ids, g2l, bits, alpha, train_mask, loss_coef):
    """The subgraph the sampler would have sent for the sorted, distinct ``node_ids``.

    Args:
        indptr, indices: the full graph (CSR, sorted rows, both directions of each edge).
        node_ids: int64 [n], strictly ascending, each in [0, N) (checked by the decoder).
        g2l: int32 [N] scratch, all -1; bits: uint64 [ceil(N / 64)] scratch, all 0. Both restored.
        alpha: float32 [E] aggregator coefficients, or empty for plain mean aggregation.
        train_mask: uint8 [N] (1 = training node), or empty when every node trains.
        loss_coef: float32 [N] loss coefficients, or empty for uniform loss weights.

    Returns:
        ``(bad_row, sub_indptr int64 [n+1], sub_indices int32 [e], edge_weights float32 [e],
        edge_weights_t float32 [e], loss_weights float32 [n])``; ``bad_row`` is ``EXPAND_OK``, or a
        local row with an entry whose reverse is missing (a directed graph).
    """
    n = node_ids.size
    want_eids = alpha.size > 0
    bound = np.int64(0)
    for i in range(n):
        v = np.uint64(node_ids[i])
        bits[v >> _SIX] |= _ONE << (v & _LOW6)
        g2l[v] = i
        bound += indptr[v + _ONE] - indptr[v]
    # Branchless scan: every neighbour is written, the count advances by its membership bit.
    sub_indptr = np.empty(n + 1, dtype=np.int64)
    sub_indptr[0] = 0
    kept = np.empty(bound, dtype=np.int32)
    eids = np.empty(bound if want_eids else 0, dtype=np.int64)
    e = np.uint64(0)
    if want_eids:
        for i in range(n):
            v = np.uint64(node_ids[i])
            for k in range(np.uint64(indptr[v]), np.uint64(indptr[v + _ONE])):
                u = np.uint64(indices[k])
                kept[e] = u
                eids[e] = k
                e += (bits[u >> _SIX] >> (u & _LOW6)) & _ONE
            sub_indptr[i + 1] = e
    else:
        for i in range(n):
            v = np.uint64(node_ids[i])
            for k in range(np.uint64(indptr[v]), np.uint64(indptr[v + _ONE])):
                u = np.uint64(indices[k])
                kept[e] = u
                e += (bits[u >> _SIX] >> (u & _LOW6)) & _ONE
            sub_indptr[i + 1] = e
    for i in range(n):
        bits[np.uint64(node_ids[i]) >> _SIX] = 0
    sub_indices = np.empty(e, dtype=np.int32)
    for k in range(e):
        sub_indices[k] = g2l[np.uint64(kept[k])]
    for i in range(n):
        g2l[np.uint64(node_ids[i])] = -1

    weights = np.empty(e, dtype=np.float32)
    for i in range(n):
        start = np.uint64(sub_indptr[i])
        stop = np.uint64(sub_indptr[i + 1])
        if stop == start:
            continue
        if want_eids:
            # GraphSAINT: the full graph's mean aggregator 1/deg(v), divided by alpha(u, v).
            v = node_ids[i]
            inv_deg = 1.0 / (indptr[v + 1] - indptr[v])
            for k in range(start, stop):
                weights[k] = inv_deg / alpha[np.uint64(eids[k])]
        else:
            w = np.float32(1.0 / np.int64(stop - start))
            for k in range(start, stop):
                weights[k] = w
    weights_t = np.empty(e, dtype=np.float32)
    bad_row = _transpose_weights(sub_indptr, sub_indices, weights, weights_t)

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
    return bad_row, sub_indptr, sub_indices, weights, weights_t, loss


@njit(cache=True)
def _transpose_weights(sub_indptr, sub_indices, weights, weights_t):
    """Algorithm 6 of the GraphSAINT parallel-training paper: the transpose's weight at each CSR position.

    Entry (v, u) takes the weight of (u, v), the next free slot of row u (rows are sorted); only entries
    below the diagonal are visited, each swapping with its partner. Returns ``EXPAND_OK``, or a local row
    with an entry whose reverse is missing.
    """
    n = np.uint64(sub_indptr.size - 1)
    ptr = np.empty(n, dtype=np.uint64)
    for v in range(n):
        j = np.uint64(sub_indptr[v])
        end = np.uint64(sub_indptr[v + _ONE])
        while j < end:
            u = np.uint64(sub_indices[j])
            if u >= v:
                break
            p = ptr[u]
            if p >= np.uint64(sub_indptr[u + _ONE]) or np.uint64(sub_indices[p]) > v:
                return np.int64(v)
            if np.uint64(sub_indices[p]) < v:
                return np.int64(u)
            weights_t[p] = weights[j]
            weights_t[j] = weights[p]
            ptr[u] = p + _ONE
            j += _ONE
        if j < end and np.uint64(sub_indices[j]) == v:
            weights_t[j] = weights[j]
            j += _ONE
        ptr[v] = j
    for u in range(n):
        if ptr[u] != np.uint64(sub_indptr[u + _ONE]):
            return np.int64(u)
    return np.int64(EXPAND_OK)
