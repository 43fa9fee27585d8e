"""From a sampled node set to the finished subgraph, straight into CSR (no COO detour).

Steps, in one kernel call: node clipping (GraphSAINT section 6.2), sorting the
node ids, the global-to-local map, induction row by row (FastSample's fused
CSR construction: each kept neighbour is appended to its row as the row is
scanned, so ``indptr`` comes for free), the aggregator weights, the
transposed weights by Algorithm 6 and the loss weights.

The node set lives in a membership bitset (one bit per node, uint64 words;
``kernels.select``), which serves three times: it sorts the node set when
that is dense (see :func:`sorted_node_ids`), it answers membership during
induction, and with a rank per word it gives each member's local id
(``select.local_id``), so there is no map of one entry per node. Only the
words the set touched are reset, so nothing proportional to the full graph
is allocated or cleared per subgraph.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from saintpipe.services.sampler.kernels.oriented import induce_oriented
from saintpipe.services.sampler.kernels.rng import bounded
from saintpipe.services.sampler.kernels.select import bitset_words, clear_nodes, index_ranks, local_id, unmark

__all__ = ["bitset_words", "clip_nodes", "complete_subgraph", "finish_node_set", "finish_subgraph", "induce_node_set",
           "induce_scan", "radix_sort_ids", "release_nodes", "sorted_node_ids", "stage_subgraph", "transpose_weights"]

STATUS_OK = 0
STATUS_ASYMMETRIC = 1
# Sort by scanning the bitset when it spans at most this many words per node: the scan beats np.sort up
# to about 16 words per node (docs/explanation/sampler.md), and the cut keeps the O(N / 64) scan off sparse
# sets of huge graphs.
DENSE_WORDS_PER_NODE = 16
# Sparse sets are sorted by LSD radix sort, this many bits per pass (2048 buckets, 16 KiB of counts that stay
# in L1): ids spanning 2**24 take 3 passes, far faster than Numba's np.sort.
RADIX_BITS = 11
# Hot loops index with uint64: Numba adds a negative-index wraparound (three more instructions, and a
# scatter where a loop could vectorize) to every access through a signed index; unsigned ones have none.
_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)


@intrinsic
def _cttz(typingctx, x):
    """Count trailing zeros of a uint64 (one ``tzcnt``); ``x`` must not be zero."""
    if x != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))
    return types.uint64(types.uint64), codegen


@njit(cache=True, nogil=True)
def sorted_node_ids(bits, sel, first, count, dense_words_per_node):
    """The node set ``sel[first:count]`` (distinct ids) sorted ascending as int64; sets their bits.

    ``bits`` (uint64 [ceil(N/64)]) gets one bit per node (a selection kernel
    has set them already: setting them again changes nothing). When the set's bits span at
    most ``dense_words_per_node`` words per node, the ids are read back in
    order by scanning those words, O(span / 64 + k) (a random walk with 3000
    roots on cora selects 90 % of the graph); else they are sorted by
    :func:`radix_sort_ids`, O(k) per pass. Both ways give the same array.
    """
    k = count - first
    node_ids = np.empty(k, dtype=np.int64)
    if k == 0:
        return node_ids
    lo = sel[first]
    hi = lo
    for i in range(first, count):
        v = sel[i]
        uv = np.uint64(v)
        bits[uv >> _SIX] |= _ONE << (uv & _LOW6)
        lo = min(lo, v)
        hi = max(hi, v)
    w_lo = np.int64(lo >> 6)
    w_hi = np.int64(hi >> 6)
    if w_hi - w_lo + 1 <= dense_words_per_node * k:
        j = np.uint64(0)
        for w in range(np.uint64(w_lo), np.uint64(w_hi) + _ONE):
            word = bits[w]
            base = w << _SIX
            while word != 0:
                node_ids[j] = base + _cttz(word)
                j += _ONE
                word &= word - _ONE
    else:
        radix_sort_ids(sel[first:count], lo, hi, node_ids)
    return node_ids


@njit(cache=True, nogil=True)
def radix_sort_ids(values, lo, hi, out):
    """``out[:] = np.sort(values)`` for ids in ``[lo, hi]``: LSD radix sort of ``value - lo``, RADIX_BITS a pass.

    O(passes * (k + 2**RADIX_BITS)) with ``passes = ceil(bit_length(hi - lo) / RADIX_BITS)``; each pass is a
    stable counting sort, so the ids come out in ascending order.
    """
    k = values.size
    keys = np.empty(k, dtype=np.uint64)
    spare = np.empty(k, dtype=np.uint64)
    base = np.int64(lo)
    for i in range(k):
        keys[i] = np.uint64(np.int64(values[i]) - base)
    buckets = 1 << RADIX_BITS
    mask = np.uint64(buckets - 1)
    counts = np.empty(buckets, dtype=np.int64)
    span = np.uint64(np.int64(hi) - base)
    shift = np.uint64(0)
    while shift == 0 or (span >> shift) != 0:
        counts[:] = 0
        for i in range(k):
            counts[(keys[i] >> shift) & mask] += 1
        total = np.int64(0)
        for b in range(buckets):
            c = counts[b]
            counts[b] = total
            total += c
        for i in range(k):
            key = keys[i]
            d = (key >> shift) & mask
            spare[counts[d]] = key
            counts[d] += 1
        keys, spare = spare, keys
        shift += np.uint64(RADIX_BITS)
    for i in range(k):
        out[i] = np.int64(keys[i]) + base


@njit(cache=True, nogil=True)
def clip_nodes(state, bits, sel, count, multiple):
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
    unmark(bits, sel, 0, drop)
    return drop


@njit(cache=True, nogil=True)
def induce_scan(indptr, indices, bits, node_ids, want_eids):
    """The induction's scan: ``sub_indptr`` and each kept entry's global column (and CSR position).

    ``bits`` (uint64 [ceil(N/64)]) is the membership bitset with exactly the
    subgraph's nodes set; it is left as it is. Most neighbours scanned on a
    large graph are not in the subgraph; the bitset answers that from a few
    hundred KiB to 2 MiB that stay in cache. The scan is
    branchless (every neighbour is written, the count advances by its bit),
    since on such graphs the membership branch is unpredictable.

    Returns ``(sub_indptr int64 [n+1], kept int32, tmp_eid int64)``: the first
    ``e = sub_indptr[n]`` entries of ``kept`` are the kept neighbours' global
    ids, row by row, and with ``want_eids`` those of ``tmp_eid`` their
    full-graph CSR positions (``tmp_eid`` is empty otherwise).
    """
    n = node_ids.size
    bound = np.int64(0)
    for i in range(n):
        v = node_ids[i]
        bound += indptr[v + 1] - indptr[v]
    sub_indptr = np.empty(n + 1, dtype=np.int64)
    sub_indptr[0] = 0
    kept = np.empty(bound, dtype=np.int32)
    tmp_eid = np.empty(bound if want_eids else 0, dtype=np.int64)
    e = np.uint64(0)
    if want_eids:
        for i in range(n):
            v = np.uint64(node_ids[i])
            for k in range(np.uint64(indptr[v]), np.uint64(indptr[v + _ONE])):
                u = np.uint64(indices[k])
                kept[e] = u
                tmp_eid[e] = k
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
    return sub_indptr, kept, tmp_eid


@njit(cache=True, nogil=True)
def transpose_weights(sub_indptr, sub_indices, weights, weights_t):
    """Algorithm 6: the data array of the transpose, by one pass over the CSR.

    Entry ``(v, u)`` carries the transpose's weight at ``(u, v)``, which sits
    at the next free slot of row ``u`` because rows are sorted. The pattern
    being symmetric, the two entries swap weights, so only the entries below
    the diagonal (``u < v``) are visited: ``ptr[u]`` walks the part of row
    ``u`` above the diagonal, set up when row ``u`` was passed. That halves
    the random accesses of the textbook pass (every entry visiting its
    partner) and gives the same array.

    The pattern must be symmetric: each partner is checked to hold column
    ``v``, and every row's part above the diagonal to be used up. Returns
    ``-1`` on success, else a local row with an entry whose reverse is missing.
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
                return np.int64(v)  # (u, v) is missing
            if np.uint64(sub_indices[p]) < v:
                return np.int64(u)  # (u, sub_indices[p]) found no partner in its row
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
    return np.int64(-1)


@njit(cache=True, nogil=True, inline="always")
def in_train(train_bits, v):
    """Whether node ``v`` is a training node, from the packed mask (one bit per node, little bit order)."""
    uv = np.uint64(v)
    return np.int64((train_bits[uv >> np.uint64(3)] >> (uv & np.uint64(7))) & 1)


@njit(cache=True, nogil=True)
def stage_subgraph(indptr, indices, orientation, bits, ranks, sel, count, clip_multiple, state, want_eids):
    """The first half of :func:`finish_subgraph`: clip, sort, rank and scan; sizes the subgraph.

    Leaves the node set in ``bits``: follow with :func:`complete_subgraph`,
    or with :func:`release_nodes` when giving up. ``ranks`` (int32
    [ceil(N/64)]) is scratch for ``select.local_id``. ``orientation``: the
    graph's :class:`~saintpipe.services.sampler.kernels.oriented.Orientation`,
    whose lists the induction then scans instead of the full rows (the same
    result), or ``oriented.EMPTY``.

    Returns ``(node_ids int64 [n], sub_indptr int64 [n+1], kept, tmp_eid)``
    as :func:`induce_scan`'s, except that ``kept`` holds local ids (the
    subgraph's columns); the subgraph has ``e = sub_indptr[n]`` entries.
    """
    first = clip_nodes(state, bits, sel, count, clip_multiple)
    node_ids = sorted_node_ids(bits, sel, first, count, DENSE_WORDS_PER_NODE)
    index_ranks(ranks, node_ids)
    oindptr, ocolumns, oforward, oreverse = orientation
    if oindptr.size > 0:
        sub_indptr, kept, tmp_eid = induce_oriented(oindptr, ocolumns, oforward, oreverse, bits, ranks, node_ids,
                                                    want_eids)
    else:
        sub_indptr, kept, tmp_eid = induce_scan(indptr, indices, bits, node_ids, want_eids)
        for k in range(sub_indptr[node_ids.size]):
            kept[k] = local_id(bits, ranks, kept[k])
    return node_ids, sub_indptr, kept, tmp_eid


@njit(cache=True, nogil=True)
def release_nodes(bits, node_ids):
    """Empty the node set of a staged subgraph (done by :func:`complete_subgraph`, or when giving up)."""
    clear_nodes(bits, node_ids)


@njit(cache=True, nogil=True)
def complete_subgraph(indptr, bits, node_ids, sub_indptr, kept, tmp_eid, alpha, train_mask, loss_coef,
                      sub_indices, weights, weights_t, loss):
    """The second half of :func:`finish_subgraph`: columns, weights, Algorithm 6, loss weights.

    Writes into output arrays the caller provides (``sub_indices`` int32 [e],
    ``weights`` and ``weights_t`` float32 [e], ``loss`` float32 [n]), which
    may lie inside an encoded message's buffer; empties the node set (``bits``).

    Returns ``(status, bad_row)`` as :func:`finish_subgraph`.
    """
    n = node_ids.size
    e = sub_indptr[n]
    # A loop, not `sub_indices[:e] = kept[:e]`: Numba compiles an array's slice assignment with its shape-mismatch
    # error, whose message formatting alone took 2 s to compile, once per process on a cold cache (the sampler
    # worker's and the codec's first subgraph waited for it); LLVM makes the same copy of the loop.
    for k in range(e):
        sub_indices[k] = kept[k]
    release_nodes(bits, node_ids)

    for i in range(n):
        start = np.uint64(sub_indptr[i])
        stop = np.uint64(sub_indptr[i + 1])
        if stop == start:
            continue
        if alpha.size > 0:
            # GraphSAINT: the full graph's mean aggregator 1/deg(v), divided by alpha(u, v).
            v = node_ids[i]
            inv_deg = 1.0 / (indptr[v + 1] - indptr[v])
            for k in range(start, stop):
                weights[k] = inv_deg / alpha[np.uint64(tmp_eid[k])]
        else:
            w = np.float32(1.0 / np.int64(stop - start))
            for k in range(start, stop):
                weights[k] = w
    bad_row = transpose_weights(sub_indptr, sub_indices, weights, weights_t)
    status = STATUS_OK if bad_row < 0 else STATUS_ASYMMETRIC

    loss[:] = 0
    if loss_coef.size > 0:
        for i in range(n):
            v = node_ids[i]
            if train_mask.size == 0 or in_train(train_mask, v):
                loss[i] = loss_coef[v]
    elif train_mask.size > 0:
        num_train = 0
        for i in range(n):
            num_train += in_train(train_mask, node_ids[i])
        if num_train > 0:
            w = np.float32(1.0 / num_train)
            for i in range(n):
                if in_train(train_mask, node_ids[i]):
                    loss[i] = w
    elif n > 0:
        loss[:] = np.float32(1.0 / n)
    return status, bad_row


@njit(cache=True, nogil=True)
def finish_subgraph(indptr, indices, orientation, bits, ranks, sel, count, clip_multiple, state,
                    alpha, train_mask, loss_coef, want_eids):
    """Clip, sort, induce, weight and transpose one sampled node set; empties the set (``bits``).

    Args:
        indptr, indices: the full graph. orientation: its oriented lists, or ``oriented.EMPTY``
            (see :func:`stage_subgraph`). bits, sel, count: the marked node set (``kernels.select``).
        ranks: int32 [ceil(N/64)] scratch for the local ids.
        clip_multiple: node clipping multiple (``0`` for none). state: the random stream.
        alpha: float32 [E] aggregator coefficients, or empty for plain mean aggregation.
        train_mask: the training nodes as bits, uint8 [ceil(N/8)] (``np.packbits(mask, bitorder="little")``),
            or empty when every node trains.
        loss_coef: float32 [N] loss coefficients, or empty for uniform loss weights.
        want_eids: also return the full-graph CSR position of every entry (else an empty ``eids``).

    Returns:
        ``(status, bad_row, node_ids, sub_indptr, sub_indices, eids, weights, weights_t, loss)``.
        ``status`` is ``STATUS_ASYMMETRIC`` (with the local ``bad_row``) when the
        induced pattern is not symmetric, i.e. the graph is directed.
    """
    want_eids = want_eids or alpha.size > 0
    node_ids, sub_indptr, kept, tmp_eid = stage_subgraph(indptr, indices, orientation, bits, ranks, sel, count,
                                                         clip_multiple, state, want_eids)
    status, bad_row, sub_indices, weights, weights_t, loss = _completed(indptr, bits, node_ids, sub_indptr, kept,
                                                                         tmp_eid, alpha, train_mask, loss_coef)
    eids = tmp_eid[:sub_indptr[node_ids.size]].copy() if want_eids else tmp_eid
    return status, bad_row, node_ids, sub_indptr, sub_indices, eids, weights, weights_t, loss


@njit(cache=True, nogil=True)
def _completed(indptr, bits, node_ids, sub_indptr, kept, tmp_eid, alpha, train_mask, loss_coef):
    """:func:`complete_subgraph` into new arrays: ``(status, bad_row, sub_indices, weights, weights_t, loss)``."""
    e = sub_indptr[node_ids.size]
    sub_indices = np.empty(e, dtype=np.int32)
    weights = np.empty(e, dtype=np.float32)
    weights_t = np.empty(e, dtype=np.float32)
    loss = np.empty(node_ids.size, dtype=np.float32)
    status, bad_row = complete_subgraph(indptr, bits, node_ids, sub_indptr, kept, tmp_eid, alpha, train_mask,
                                        loss_coef, sub_indices, weights, weights_t, loss)
    return status, bad_row, sub_indices, weights, weights_t, loss


@njit(cache=True, nogil=True)
def induce_node_set(indptr, indices, bits, ranks, node_ids, alpha, train_mask, loss_coef):
    """The subgraph of a node set that arrived without its edges (the pool's ``nodes`` wire), as
    :func:`finish_subgraph` made it when the set was drawn: the same scan, weights, Algorithm 6 and loss
    weights, so a consumer's re-induction is bit for bit the sampler's (FastSample's fused induction, done
    on the consumer's side).

    Args:
        indptr, indices: the graph the set was drawn from (CSR, sorted rows, both directions of each edge).
        bits: uint64 [ceil(N/64)] scratch, all 0 (left so). ranks: int32 [ceil(N/64)] scratch.
        node_ids: int64 [n], strictly ascending, each in [0, N) (the decoder checked).
        alpha, train_mask, loss_coef: as :func:`finish_subgraph`'s (empty arrays: none).

    Returns:
        ``(bad_row, sub_indptr, sub_indices, weights, weights_t, loss)``; ``bad_row`` is -1, or a local
        row with an entry whose reverse is missing (a directed graph).
    """
    n = node_ids.size
    for i in range(n):
        v = np.uint64(node_ids[i])
        bits[v >> _SIX] |= _ONE << (v & _LOW6)
    index_ranks(ranks, node_ids)
    sub_indptr, kept, tmp_eid = induce_scan(indptr, indices, bits, node_ids, alpha.size > 0)
    for k in range(sub_indptr[n]):
        kept[k] = local_id(bits, ranks, kept[k])
    _, bad_row, sub_indices, weights, weights_t, loss = _completed(indptr, bits, node_ids, sub_indptr, kept, tmp_eid,
                                                                   alpha, train_mask, loss_coef)
    return bad_row, sub_indptr, sub_indices, weights, weights_t, loss


@njit(cache=True, nogil=True)
def finish_node_set(bits, sel, count, clip_multiple, state):
    """Clip and sort the marked node set ``sel[:count]`` without inducing it; returns its ids (int64, ascending).

    For the pool's ``nodes`` wire: the trainer induces the CSR and computes the weights from its own copy of
    the topology (FastSample's replicated topology), so the sampling core spends nothing on induction, weights
    or encoding megabytes. The ids are exactly the ``node_ids`` that :func:`finish_subgraph` would produce from
    the same selection and random state. Empties the set (``bits``), as induction would.
    """
    first = clip_nodes(state, bits, sel, count, clip_multiple)
    node_ids = sorted_node_ids(bits, sel, first, count, DENSE_WORDS_PER_NODE)
    clear_nodes(bits, node_ids)
    return node_ids
