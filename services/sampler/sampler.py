"""The sampler facade: configured once per graph, then ``sample(seed)`` per subgraph.

A :class:`Sampler` owns everything that is built once per graph (alias
tables, the dashboard, the global-to-local map) and reuses it on every call;
it is therefore not thread-safe: use one per thread or process. Subclasses
only say how big their node set can get and call their node-selection kernel;
clipping, induction, weights, the transpose and loss weights are the common
path in :func:`saintpipe.services.sampler.kernels.induce.finish_subgraph`.

Weights without a :class:`~saintpipe.services.sampler.coefficients.Normalization`:
``edge_weights`` are plain mean aggregation over the subgraph (``1 / deg_s(v)``
on row ``v``, ``deg_s`` the degree inside the subgraph) and ``loss_weights``
are uniform over the subgraph's training nodes (``1 / |train nodes in
subgraph|``, 0 for the others; ``1 / |V_s|`` for all when no training nodes
were given). With one, they are GraphSAINT's normalized coefficients (see
that module).

Example:
    >>> import numpy as np
    >>> from saintpipe.services.sampler.config import RandomWalkConfig
    >>> indptr, indices = np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1])
    >>> sampler = make_sampler(RandomWalkConfig(roots=2, clip_multiple=None), indptr, indices)
    >>> sampler.sample(7).equals(sampler.sample(7))
    True
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, NoReturn

import numpy as np

from saintpipe.core.errors import InvalidArgument
from saintpipe.core.seeds import DERIVED_SEED_MAX
from saintpipe.services.sampler.config import (
    EdgeConfig,
    FrontierConfig,
    NodeConfig,
    RandomWalkConfig,
    SamplerConfigModel,
)
from saintpipe.services.sampler.graph import prepare_graph, readonly
from saintpipe.services.sampler.kernels import rng
from saintpipe.services.sampler.kernels.dependent import clip_nodes_dependent
from saintpipe.services.sampler.kernels.edge import (
    MIN_LINKED_SHARE,
    build_edge_table,
    edge_select,
    edge_select_by_ends,
    edge_select_dependent,
)
from saintpipe.services.sampler.kernels.frontier import LOOKAHEAD, NUM_STATS, frontier_select, frontier_select_tree
from saintpipe.services.sampler.kernels.frontier_dependent import frontier_select_dependent
from saintpipe.services.sampler.kernels.induce import (
    STATUS_OK,
    bitset_words,
    complete_subgraph,
    finish_node_set,
    finish_subgraph,
    release_nodes,
    stage_subgraph,
)
from saintpipe.services.sampler.kernels.node import (
    build_node_table,
    node_select,
    node_select_by_columns,
    node_select_dependent,
)
from saintpipe.services.sampler.kernels.oriented import EMPTY, Orientation, orient_graph
from saintpipe.services.sampler.kernels.random_walk import random_walk_select, random_walk_select_dependent
from saintpipe.services.sampler.online import OnlineNormalization
from saintpipe.services.sampler.online_shared import SharedOnlineCounts, SharedOnlineState
from saintpipe.core.subgraph import Subgraph

if TYPE_CHECKING:
    from saintpipe.services.sampler.coefficients import Normalization

log = logging.getLogger(__name__)

_EMPTY_F32 = readonly(np.empty(0, dtype=np.float32), np.float32)
_EMPTY_U8 = readonly(np.empty(0, dtype=np.uint8), np.uint8)
MAX_STEP = 2**63 - 1


def _check_int(value: int, name: str, maximum: int, bound: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgument(f"{name} must be an integer, got {type(value).__name__}")
    if not 0 <= int(value) <= maximum:
        raise InvalidArgument(f"{name} must be in [0, {bound}), got {value}")
    return int(value)


class Sampler:
    """Base of the four samplers; see the module docstring.

    Dependent minibatches (``config.kappa > 1``, docs/explanation/sampler.md): a call with
    ``step=t`` draws step ``t`` of the chain ``chain`` (given here, one per
    sampler worker): its node choices come from per-slot variates that change
    slowly with ``t`` (``kernels/dependent.py``), so nearby steps share most
    nodes while each subgraph has the law of an independent draw. A call
    without a step, or with ``kappa == 1``, is an independent draw from
    ``seed`` alone.

    A sampler on a graph of its own ids (the training graph) is given
    ``node_map``, the global id of each of its nodes (ascending): ``sample``,
    ``sample_into`` and ``sample_nodes`` then return global ids (one gather of
    the node set), while ``sample_arrays``, the pre-sampling's, keeps the
    graph's own ids and CSR positions, which the normalization counts index.
    """

    kind: ClassVar[str] = ""

    def __init__(self, config: SamplerConfigModel, indptr: np.ndarray, indices: np.ndarray, *,
                 normalization: Normalization | None = None, train_nodes: np.ndarray | None = None,
                 check_graph: bool = True, chain: int = 0, node_map: np.ndarray | None = None,
                 orientation: Orientation | None = None) -> None:
        self.config = config
        self.kappa = int(config.kappa)
        self.chain = np.uint64(int(chain) & DERIVED_SEED_MAX)  # uint64: kernels would read a Python int as int64
        self.indptr, self.indices = prepare_graph(indptr, indices, check=check_graph)
        self.num_nodes = self.indptr.size - 1
        self.num_edges = self.indices.size
        self.orientation = self._orientation(config, orientation)
        self.node_map = None if node_map is None else readonly(node_map, np.int64)
        if self.node_map is not None and self.node_map.shape != (self.num_nodes,):
            raise InvalidArgument(f"node_map has shape {self.node_map.shape}, the graph has {self.num_nodes} nodes")
        self.normalization = normalization
        # The training nodes as bits (one bit per node, not a byte: 2 MiB at 16.8 M nodes, per sampler).
        self._train_mask = _EMPTY_U8
        if train_nodes is not None:
            self._train_mask = readonly(np.packbits(train_mask(train_nodes, self.num_nodes), bitorder="little"),
                                        np.uint8)
        self._alpha, self._loss_coef = _EMPTY_F32, _EMPTY_F32
        # Online normalization: this sampler counts what it produces, into the state the service's workers on
        # this host share (the supervisor refreshes it) or into its own (it refreshes its coefficients itself).
        self.online: OnlineNormalization | SharedOnlineCounts | None = None
        if normalization is not None:
            normalization.check_graph(self.num_nodes, self.num_edges)
            if normalization.method == "online":
                self.online = self._online(normalization)
            # Online: read-only views of the live arrays, which are refreshed in place.
            alpha, loss = ((self.online.alpha, self.online.loss) if self.online is not None
                           else (normalization.aggregator_coefficients, normalization.loss_coefficients))
            self._alpha, self._loss_coef = readonly(alpha, np.float32), readonly(loss, np.float32)
        self._clip = int(config.clip_multiple or 0)
        self._state = rng.new_state()
        # The node set: one bit per node, zero between calls (kernels reset the words they touch), and the
        # rank of each word, from which a member's local id follows (kernels.select); no map of one entry per node.
        self._bits = np.zeros(bitset_words(self.num_nodes), dtype=np.uint64)
        self._ranks = np.zeros(self._bits.size, dtype=np.int32)
        self._sel = np.empty(max(1, min(self._selection_bound(), self.num_nodes)), dtype=np.int32)

    def _orientation(self, config: SamplerConfigModel, given: Orientation | None) -> Orientation:
        """The oriented lists induction scans (``config.induction == "oriented"``), else ``EMPTY`` (plain scan)."""
        if config.induction != "oriented":
            return EMPTY
        if given is not None:  # built once for every worker of a host (the sampler service)
            if given.indptr.shape != (self.num_nodes + 1,):
                raise InvalidArgument(f"orientation has {given.indptr.size - 1} nodes, the graph {self.num_nodes}")
            return Orientation(*(readonly(a, a.dtype) for a in given))
        built = orient_graph(self.indptr, self.indices)
        return EMPTY if built is None else built  # not symmetric: the scan reports it on the first subgraph

    def _online(self, normalization: Normalization) -> OnlineNormalization | SharedOnlineCounts:
        if normalization.shared_state:
            state = SharedOnlineState.attach(normalization.shared_state, self.num_nodes, self.num_edges)
            if state is not None:
                return SharedOnlineCounts(state)
            log.info("online normalization: no shared state %s on this host; this sampler keeps its own",
                     normalization.shared_state)
        mask = (np.unpackbits(self._train_mask, count=self.num_nodes, bitorder="little") if self._train_mask.size
                else self._train_mask)
        return OnlineNormalization(self.indptr, normalization.loss_coefficients, normalization.aggregator_coefficients,
                                   mask, normalization.strength, max_subgraphs=normalization.num_subgraphs)

    def _selection_bound(self) -> int:
        """An upper bound on the node set's size before clipping."""
        raise NotImplementedError

    def _select(self) -> int:
        """Run the node-selection kernel on ``self._state``; returns the size of ``self._sel``'s node set."""
        raise NotImplementedError

    def _select_dependent(self, step: int) -> int:
        """Run the dependent node-selection kernel for ``step`` of the chain; the size of the node set."""
        raise NotImplementedError

    @property
    def dependent(self) -> bool:
        """Whether calls with a ``step`` draw dependent subgraphs (``kappa > 1``)."""
        return self.kappa > 1

    def _select_seeded(self, seed: int, step: int | None) -> tuple[int, int | None, int, int]:
        """Check the seed (an integer in ``[0, 2**64)``, a derived subgraph seed: :data:`DERIVED_SEED_MAX`) and
        the chain step (None or an integer in ``[0, 2**63)``), seed the random stream and run the node-selection
        kernel: ``(seed, step, size of the node set, clip multiple left to apply)``.

        With a step (and ``kappa > 1``) the node set comes from the chain's slots
        and is clipped here, with the chain's node keys; nothing is left to clip.
        """
        seed = _check_int(seed, "seed", DERIVED_SEED_MAX, "2**64")
        step = None if step is None else _check_int(step, "step", MAX_STEP, "2**63")
        rng.seed_state(self._state, np.uint64(seed))
        if step is None or self.kappa == 1:
            return seed, step, self._select(), self._clip
        count = self._select_dependent(step)
        return seed, step, clip_nodes_dependent(self.chain, step, self.kappa, self._bits, self._sel, count,
                                                self._clip), 0

    def sample_arrays(self, seed: int, *, want_positions: bool = True,
                      step: int | None = None) -> tuple[Subgraph, np.ndarray]:
        """Like :meth:`sample`, plus the full-graph CSR position of every subgraph entry (int64 [e]).

        With ``want_positions=False`` the positions may come back empty (they
        are computed anyway when normalization needs them).
        """
        seed, step, count, clip = self._select_seeded(seed, step)
        status, bad_row, node_ids, sub_indptr, sub_indices, eids, weights, weights_t, loss = finish_subgraph(
            self.indptr, self.indices, self.orientation, self._bits, self._ranks, self._sel, count, clip,
            self._state, self._alpha, self._train_mask, self._loss_coef, want_positions)
        if status != STATUS_OK:
            _asymmetric(node_ids, bad_row)
        if self.online is not None:  # after the weights: a subgraph never weighs itself
            self.online.observe(node_ids, eids)
        subgraph = Subgraph(node_ids=node_ids, indptr=sub_indptr, indices=sub_indices, edge_weights=weights,
                            edge_weights_t=weights_t, loss_weights=loss, seed=seed)
        return subgraph, eids

    def sample_nodes(self, seed: int, *, step: int | None = None) -> np.ndarray:
        """The node set of :meth:`sample` (``sample(seed).node_ids``, int64 ascending), without inducing it.

        For the pool's ``nodes`` wire: the trainer induces the subgraph and computes its weights again.
        """
        seed, step, count, clip = self._select_seeded(seed, step)
        node_ids = finish_node_set(self._bits, self._sel, count, clip, self._state)
        return node_ids if self.node_map is None else self.node_map[node_ids]

    def sample_into(self, seed: int, place: Callable[[int, int], tuple[np.ndarray, ...]], *,
                    step: int | None = None) -> Subgraph:
        """Like :meth:`sample`, with the subgraph's arrays written where ``place`` puts them.

        Once the node set is chosen and induced (its size known), the kernels
        call ``place(num_nodes, num_edges)``, which returns six writable arrays
        of exactly these dtypes and sizes: node_ids int64 [n], indptr int64
        [n+1], indices int32 [e], edge_weights and edge_weights_t float32 [e],
        loss_weights float32 [n]. The rest of the kernels write into them, so
        when they are views of an encoded message's buffer
        (:func:`saintpipe.services.pool.codec.frame_subgraph`) no copy of the subgraph
        follows. The values are those of ``sample(seed, step=step)``, bit for bit.

        Raises:
            InvalidArgument: as :meth:`sample`, or arrays from ``place`` that do not fit.
            Whatever ``place`` raises; the sampler is left ready for the next call.
        """
        seed, step, count, clip = self._select_seeded(seed, step)
        node_ids, sub_indptr, kept, tmp_eid = stage_subgraph(
            self.indptr, self.indices, self.orientation, self._bits, self._ranks, self._sel, count, clip,
            self._state, self._alpha.size > 0)
        n, e = node_ids.size, int(sub_indptr[-1])
        try:
            out = tuple(place(n, e))
            _check_placed(out, n, e)
        except BaseException:
            release_nodes(self._bits, node_ids)
            raise
        ids, indptr, indices, weights, weights_t, loss = out
        if self.node_map is None:
            ids[:] = node_ids
        else:  # ids in range by construction: mode "clip" writes straight into ids, unbuffered
            np.take(self.node_map, node_ids, out=ids, mode="clip")
        indptr[:] = sub_indptr
        status, bad_row = complete_subgraph(self.indptr, self._bits, node_ids, sub_indptr, kept, tmp_eid,
                                            self._alpha, self._train_mask, self._loss_coef, indices, weights,
                                            weights_t, loss)
        if status != STATUS_OK:
            _asymmetric(node_ids, bad_row)
        if self.online is not None:
            self.online.observe(node_ids, tmp_eid[:e])
        return Subgraph(node_ids=ids, indptr=indptr, indices=indices, edge_weights=weights,
                        edge_weights_t=weights_t, loss_weights=loss, seed=seed)

    def sample(self, seed: int, *, job_id: str = "", worker: int = 0, sequence: int = 0,
               step: int | None = None) -> Subgraph:
        """Sample one subgraph; the same seed (and step) gives the same subgraph bit for bit.

        Args:
            seed: the random seed, an integer in ``[0, 2**64)`` (see
                :func:`saintpipe.services.sampler.parallel.subgraph_seed` for per-worker streams).
            job_id, worker, sequence: copied into the returned subgraph.
            step: with ``kappa > 1``, the position in the sampler's dependent chain (a worker's
                sequence number); None: an independent draw.

        Raises:
            InvalidArgument: a bad seed or step, or a directed graph.
        """
        subgraph, _ = self.sample_arrays(seed, want_positions=False, step=step)
        if self.node_map is not None:
            subgraph = dataclasses.replace(subgraph, node_ids=self.node_map[subgraph.node_ids])
        if job_id or worker or sequence:
            subgraph = dataclasses.replace(subgraph, job_id=job_id, worker=worker, sequence=sequence)
        return subgraph


_PLACED = (("node_ids", np.int64, 0, 0), ("indptr", np.int64, 0, 1), ("indices", np.int32, 1, 0),
           ("edge_weights", np.float32, 1, 0), ("edge_weights_t", np.float32, 1, 0),
           ("loss_weights", np.float32, 0, 0))


def _check_placed(out: tuple, n: int, e: int) -> None:
    """The kernels write without bounds checks: refuse arrays of another dtype, size or layout."""
    if len(out) != len(_PLACED):
        raise InvalidArgument(f"sample_into: place() returned {len(out)} arrays, expected {len(_PLACED)}")
    for arr, (name, dtype, by_edges, extra) in zip(out, _PLACED):
        size = (e if by_edges else n) + extra
        if (not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != 1 or arr.size != size
                or not arr.flags.c_contiguous or not arr.flags.writeable):
            raise InvalidArgument(f"sample_into: {name} must be a writable contiguous {np.dtype(dtype)} "
                                  f"array of {size} entries")


def _asymmetric(node_ids: np.ndarray, bad_row: int) -> NoReturn:
    raise InvalidArgument(
        f"graph is not symmetric: node {int(node_ids[bad_row])} has an edge whose reverse is missing "
        f"(samplers need an undirected graph storing both directions)")


class FrontierSampler(Sampler):
    """Frontier sampling (Algorithm 2) on a sum tree, or on the Dashboard with ``dashboard = "pins"``.

    ``last_stats`` holds the last call's pops, probes, cleanups and clamped nodes.
    """
    config: FrontierConfig

    kind = "frontier"

    def __init__(self, config: FrontierConfig, indptr: np.ndarray, indices: np.ndarray, **kwargs) -> None:
        super().__init__(config, indptr, indices, **kwargs)
        self.frontier_size = min(config.frontier_size, self.num_nodes)
        m = self.frontier_size
        self._frontier = np.empty(m, dtype=np.int32)
        self._tile_next = np.empty(m, dtype=np.int64)
        self._pending = np.empty(LOOKAHEAD, dtype=np.int64)
        self._stats = np.zeros(NUM_STATS, dtype=np.int64)
        self._pins = config.dashboard == "pins"
        # The Dashboard's arrays are sized for "pins" and left empty for the sum tree, and the reverse.
        pins, tree = (1, 0) if self._pins else (0, 1)
        self.capacity = dashboard_capacity(self.indptr, m, config.eta) if self._pins else 0
        ia = self.capacity + m + 1
        self._db = np.empty(self.capacity, dtype=np.int32)
        self._db_new = np.empty(self.capacity, dtype=np.int32)
        self._ia_start = np.empty(pins * (ia + 1), dtype=np.int64)
        self._ia_valid = np.empty(pins * (ia + 1), dtype=np.uint8)
        self._ia_tile = np.empty(pins * ia, dtype=np.int32)
        self._tile_node = np.empty(pins * m, dtype=np.int32)
        self._tile_start = np.empty(pins * m, dtype=np.int64)
        self._tile_stop = np.empty(pins * m, dtype=np.int64)
        self._tile_ia = np.empty(pins * m, dtype=np.int64)
        self._weights = np.empty(tree * m, dtype=np.int64)
        self._tree = np.empty(tree * (m + 1), dtype=np.int64)
        if self.dependent:  # the walkers of frontier_select_dependent
            self._walker_node = np.empty(m, dtype=np.int32)
            self._walker_state = np.empty(m, dtype=np.uint64)
            self._heap_time = np.empty(m, dtype=np.float64)
            self._heap_walker = np.empty(m, dtype=np.int32)

    def _selection_bound(self) -> int:
        return self.config.node_budget

    def _select_dependent(self, step: int) -> int:
        return frontier_select_dependent(self.indptr, self.indices, self.frontier_size, self.config.node_budget,
                                         self.chain, step, self.kappa, self._bits, self._sel, self._walker_node,
                                         self._walker_state, self._heap_time, self._heap_walker, self._stats)

    def _select(self) -> int:
        if not self._pins:
            return frontier_select_tree(self.indptr, self.indices, self.frontier_size, self.config.node_budget,
                                        self._state, self._bits, self._sel, self._frontier, self._weights,
                                        self._tree, self._tile_next, self._pending, self._stats)
        return frontier_select(self.indptr, self.indices, self.frontier_size, self.config.node_budget,
                               self._state, self._bits, self._sel, self._frontier, self.capacity, self._db,
                               self._db_new, self._ia_start, self._ia_valid, self._ia_tile, self._tile_node,
                               self._tile_start, self._tile_stop, self._tile_ia, self._tile_next, self._pending,
                               self._stats)

    @property
    def last_stats(self) -> dict[str, int]:
        pops, probes, cleanups, clamped = (int(x) for x in self._stats)
        return {"pops": pops, "probes": probes, "cleanups": cleanups, "clamped": clamped}


def dashboard_capacity(indptr: np.ndarray, m: int, eta: float) -> int:
    """Dashboard length ``ceil(eta * m * d)`` with ``d = |E| / |V|`` (Algorithm 3 line 1), at least m + 1.

    ``d`` approximates the frontier's mean degree, on skewed graphs too: pops are
    proportional to degree, so hubs leave the frontier quickly.
    """
    num_nodes = indptr.size - 1
    d = float(indptr[-1]) / num_nodes
    return max(int(math.ceil(eta * m * d)), m + 1)


class RandomWalkSampler(Sampler):
    config: RandomWalkConfig
    kind = "random_walk"

    def __init__(self, config: RandomWalkConfig, indptr: np.ndarray, indices: np.ndarray, **kwargs) -> None:
        super().__init__(config, indptr, indices, **kwargs)
        self._paths = np.empty((config.roots, config.walk_length + 1), dtype=np.int32)

    def _selection_bound(self) -> int:
        return self.config.roots * (self.config.walk_length + 1)

    def _select(self) -> int:
        return random_walk_select(self.indptr, self.indices, self._state, self._paths, self._bits, self._sel)

    def _select_dependent(self, step: int) -> int:
        return random_walk_select_dependent(self.indptr, self.indices, self.chain, step, self.kappa, self._paths,
                                            self._bits, self._sel)


class EdgeSampler(Sampler):
    config: EdgeConfig
    kind = "edge"

    def __init__(self, config: EdgeConfig, indptr: np.ndarray, indices: np.ndarray, **kwargs) -> None:
        super().__init__(config, indptr, indices, **kwargs)
        if self.num_edges == 0:
            raise InvalidArgument("the edge sampler needs a graph with at least one edge")
        # The table-free draw's law is the table's on a symmetric graph, which every sampler needs (induction
        # refuses an edge without its reverse); it needs enough nodes with an edge for its rejections.
        # Dependent chains (kappa > 1) draw per slot from the alias table.
        linked = int(np.count_nonzero(self.indptr[1:] != self.indptr[:-1]))
        self.by_ends = linked >= MIN_LINKED_SHARE * self.num_nodes
        self._thresh = self._alias = self._rows = None
        if not self.by_ends or self.kappa > 1:
            self._thresh, self._alias, self._rows = build_edge_table(self.indptr, self.indices)

    def _selection_bound(self) -> int:
        return 2 * self.config.edge_budget

    def _select(self) -> int:
        if self.by_ends:
            return edge_select_by_ends(self.indptr, self.indices, self.config.edge_budget, self._state, self._bits,
                                       self._sel)
        return edge_select(self.indices, self._rows, self._thresh, self._alias, self.config.edge_budget,
                           self._state, self._bits, self._sel)

    def _select_dependent(self, step: int) -> int:
        return edge_select_dependent(self.indices, self._rows, self._thresh, self._alias, self.config.edge_budget,
                                     self.chain, step, self.kappa, self._bits, self._sel)


class NodeSampler(Sampler):
    config: NodeConfig
    kind = "node"

    def __init__(self, config: NodeConfig, indptr: np.ndarray, indices: np.ndarray, **kwargs) -> None:
        super().__init__(config, indptr, indices, **kwargs)
        # The table-free draw's law is the table's on a symmetric graph with an edge (every sampler needs a
        # symmetric one); dependent chains (kappa > 1) draw per slot from the alias table.
        self.by_columns = self.num_edges > 0
        self._thresh = self._alias = None
        if not self.by_columns or self.kappa > 1:
            self._thresh, self._alias = build_node_table(self.indptr, config.uniform_mix)

    def _selection_bound(self) -> int:
        return self.config.node_budget

    def _select(self) -> int:
        if self.by_columns:
            return node_select_by_columns(self.indices, self.num_nodes, float(self.config.uniform_mix),
                                          self.config.node_budget, self._state, self._bits, self._sel)
        return node_select(self._thresh, self._alias, self.config.node_budget, self._state, self._bits,
                           self._sel)

    def _select_dependent(self, step: int) -> int:
        return node_select_dependent(self._thresh, self._alias, self.config.node_budget, self.chain, step,
                                     self.kappa, self._bits, self._sel)


SAMPLERS: dict[str, type[Sampler]] = {
    cls.kind: cls for cls in (FrontierSampler, RandomWalkSampler, EdgeSampler, NodeSampler)
}


def train_mask(train_nodes: np.ndarray, num_nodes: int) -> np.ndarray:
    """A uint8 [N] mask of the training nodes. Raises InvalidArgument for ids out of range."""
    ids = np.asarray(train_nodes)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise InvalidArgument(
            f"train_nodes must be a 1-D integer array, got {ids.dtype} with shape {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        bad = ids[(ids < 0) | (ids >= num_nodes)][0]
        raise InvalidArgument(f"train_nodes: node id {bad} is out of range [0, {num_nodes})")
    mask = np.zeros(num_nodes, dtype=np.uint8)
    mask[ids] = 1
    return mask


def make_sampler(config: SamplerConfigModel, indptr: np.ndarray, indices: np.ndarray, *,
                 normalization: Normalization | None = None, train_nodes: np.ndarray | None = None,
                 check_graph: bool = True, chain: int = 0, node_map: np.ndarray | None = None,
                 orientation: Orientation | None = None) -> Sampler:
    """Configure the sampler named by ``config.kind`` on a graph (alias tables etc. are built here, once).

    Args:
        config: a :data:`~saintpipe.services.sampler.config.SamplerConfig` model.
        indptr, indices: the full graph in CSR (undirected: both directions stored), sorted neighbour lists.
            Memory-mapped arrays are used in place.
        normalization: GraphSAINT coefficients for this graph and config (see ``normalization``);
            without them weights are plain mean aggregation and uniform loss.
        train_nodes: ids of the training nodes; the others get loss weight 0.
        check_graph: validate the CSR (one O(E) pass); skip only for graphs checked already.
        chain: the key of this sampler's dependent chain (``kappa > 1``; one per sampler worker, see
            :func:`saintpipe.services.sampler.parallel.chain_key`); ignored with ``kappa == 1``.
        node_map: int64 [N], ascending: the global id of each node of this graph (a training graph);
            subgraphs then carry global ids (see :class:`Sampler`). None: the graph's ids are global.
        orientation: this graph's :func:`~saintpipe.services.sampler.kernels.oriented.orient_graph`, built once
            and shared by the workers of a host; None: built here when ``config.induction`` is "oriented".

    Raises:
        InvalidArgument: an invalid graph, train node id, normalization shape, or a
            parameter this graph cannot satisfy (the edge sampler on an edgeless graph).
    """
    try:
        cls = SAMPLERS[config.kind]
    except (AttributeError, KeyError):
        raise InvalidArgument(f"unknown sampler config {config!r}; kinds: {', '.join(SAMPLERS)}") from None
    return cls(config, indptr, indices, normalization=normalization, train_nodes=train_nodes,
               check_graph=check_graph, chain=chain, node_map=node_map, orientation=orientation)
