"""The Dashboard of GraphSAINT Algorithms 3 and 4: pins, tiles and the index array.

Layout (all arrays preallocated once per sampler, see ``FrontierWorkspace``):

* ``db`` int32 [cap]: the dashboard. Entry ``k`` is a *pin*: the id of the
  tile of the frontier node owning that slot, or ``NULL`` once the node was
  popped (a historical entry). A frontier node ``v`` owns ``deg(v)``
  consecutive pins, so a uniform probe of the used part of ``db`` that lands
  on a valid pin picks ``v`` with probability ``deg(v) / sum(deg(FS))``.
* tiles (``tile_node``, ``tile_start``, ``tile_stop``, ``tile_ia``), one per
  frontier slot (m of them): the 4-tuple of Algorithm 3 line 14, stored once
  instead of once per pin. A popped node's tile is reused by its replacement
  (Algorithm 4 line 32).
* the index array IA (``ia_start``, ``ia_valid``, plus ``ia_tile``): column
  ``j`` describes the ``j``-th node appended since the last cleanup; its pins
  are ``db[ia_start[j]:ia_start[j + 1]]`` and ``ia_valid[j]`` says whether it
  is still in the frontier. ``ia_start[cnt]`` is the number of used entries.
  ``ia_tile`` is a third slot the paper does not need (it finds the tile
  through the first pin); nodes that got zero pins have no pin to follow.

The contiguous fills and the compaction copies are plain counted loops over
contiguous int32 memory so that LLVM vectorizes them (AVX2/AVX-512 on x86):
that is the paper's intra-sampler parallelism (``p_intra`` lanes per core).
A test inspects their assembly for vector registers.

Pins cost ``deg(v)`` writes per node added (and again to invalidate it, and
to move it at a cleanup), which grows with a skewed graph's degree tail: the
default frontier (``dashboard = "tree"``) keeps the degrees in a sum tree
instead (``kernels/frontier.py`` says why); this dashboard is ``dashboard = "pins"``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NULL = np.int32(-1)


@njit(cache=True, nogil=True, inline="always")
def fill_pins(db, start, stop, pin):
    """``db[start:stop] = pin``: pin a tile (Algorithm 4 line 34) or invalidate it with NULL (line 14).

    Indices are unsigned on purpose: with a signed index Numba's negative-index
    wraparound turns the vectorized stores into scatters (or, on AVX2, keeps
    the loop scalar); unsigned, they are plain contiguous vector stores.
    """
    base = np.uint64(start)
    for k in range(np.uint64(stop - start)):
        db[base + k] = pin


@njit(cache=True, nogil=True, inline="always")
def move_pins(dst, dst_start, src, src_start, count):
    """Copy ``count`` pins from ``src[src_start:]`` to ``dst[dst_start:]`` (Algorithm 4 line 23)."""
    out = np.uint64(dst_start)
    inp = np.uint64(src_start)
    for k in range(np.uint64(count)):
        dst[out + k] = src[inp + k]


@njit(cache=True, nogil=True)
def cleanup(db, db_new, ia_start, ia_valid, ia_tile, cnt, tile_start, tile_stop, tile_ia):
    """PARDO_CLEANUP: compact the valid pins of ``db`` into ``db_new`` and re-index IA and the tiles.

    The running offset is the cumulative sum of the IA column sizes masked by
    their valid flags (Algorithm 4 line 21); every valid node's pins then move
    as one contiguous block. Returns the new number of IA columns; the new used size is
    ``ia_start[new_cnt]``. The caller swaps ``db`` and ``db_new``.
    """
    offset = np.int64(0)
    j_new = 0
    for j in range(cnt):
        start = ia_start[j]
        size = ia_start[j + 1] - start
        if ia_valid[j]:
            move_pins(db_new, offset, db, start, size)
            t = ia_tile[j]
            tile_start[t] = offset
            tile_stop[t] = offset + size
            tile_ia[t] = j_new
            # j_new <= j, and ia_start[j + 1] was read above: rewriting in place is safe.
            ia_start[j_new] = offset
            ia_valid[j_new] = 1
            ia_tile[j_new] = t
            offset += size
            j_new += 1
    ia_start[j_new] = offset
    ia_valid[j_new] = 0
    return j_new


@njit(cache=True, nogil=True)
def add_to_frontier(v, t, pins, cnt, db, ia_start, ia_valid, ia_tile,
                    tile_node, tile_start, tile_stop, tile_ia):
    """PARDO_ADD_TO_FRONTIER: append ``pins`` pins of node ``v`` under tile ``t`` as IA column ``cnt``."""
    start = ia_start[cnt]
    stop = start + pins
    ia_start[cnt + 1] = stop
    ia_valid[cnt] = 1
    ia_valid[cnt + 1] = 0
    ia_tile[cnt] = t
    tile_node[t] = v
    tile_start[t] = start
    tile_stop[t] = stop
    tile_ia[t] = cnt
    fill_pins(db, start, stop, np.int32(t))
