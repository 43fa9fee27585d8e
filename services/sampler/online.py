"""Online normalization: training starts on the prior, and the counts of the subgraphs it uses refine it.

GraphSAINT's pre-sampling blocks training until thousands of subgraphs were drawn. Online, nothing is
drawn ahead: a sampler starts with the prior coefficients (:mod:`saintpipe.services.sampler.inclusion`)
and counts every subgraph it then produces for training, ``C(v)`` and ``C(u, v)``; from time to time the
coefficients are recomputed in place with the smoothed estimator
(:func:`~saintpipe.services.sampler.normalization.smoothed_coefficients`), so later subgraphs carry
weights that converge as the counts do. The sampler service shares one such state among the workers of a
host (:mod:`saintpipe.services.sampler.online_shared`); the private state below is for a sampler on its
own, or a worker that cannot see the shared file.

Why counting the training subgraphs is sound: they are independent draws of the same law as pre-sampled
ones, each subgraph's weights are computed before it is counted (it never weighs itself), and every
produced subgraph goes to a trainer.

Recomputing costs a pass over the nodes and edges, so it happens after 1, 2, 4, ... subgraphs and then
every ``max_interval``; counting costs a random increment per node and edge, so it stops once
``max_subgraphs`` (what the blocking pre-pass would have drawn) were counted, and sampling then runs at
full speed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.smoothed import smoothed_coefficients

__all__ = ["DEFAULT_MAX_INTERVAL", "OnlineNormalization", "count_subgraph"]

DEFAULT_MAX_INTERVAL = 256


@njit(cache=True, nogil=True)
def count_subgraph(node_counts, edge_counts, node_ids, eids):
    """Add one subgraph: ``C(v) += 1`` for its nodes, ``C(u, v) += 1`` at its edges' CSR positions.

    Counts saturate at the int32 maximum instead of wrapping.
    """
    top = np.iinfo(np.int32).max
    for i in range(node_ids.size):
        v = node_ids[i]
        if node_counts[v] < top:
            node_counts[v] += 1
    for k in range(eids.size):
        e = eids[k]
        if edge_counts[e] < top:
            edge_counts[e] += 1


class OnlineNormalization:
    """A sampler's online coefficients: the prior, refined in place from the subgraphs it produces.

    Args:
        indptr: the full graph's CSR offsets.
        prior_loss, prior_alpha: the prior's loss coefficients (float32 [N]: ``1 / (p0(v) |V_train|)`` on
            training nodes, 0 elsewhere) and aggregator coefficients (float32 [E]).
        train_mask: uint8 [N], 1 on training nodes (empty: every node trains).
        strength: the prior's weight in pseudo-subgraphs (see ``smoothed_coefficients``).
        max_interval: the most subgraphs between two recomputations.
        max_subgraphs: count this many subgraphs, then keep the coefficients (0: count for ever).
        arrays: ``(loss, alpha, node_counts, edge_counts)`` to use in place of private ones (the shared
            state of :mod:`saintpipe.services.sampler.online_shared`), already holding the prior and the
            counts so far; None: private arrays, the prior copied and zero counts.

    ``loss`` and ``alpha`` are the live coefficients: the sampler reads them
    (through read-only views) for every subgraph; :meth:`observe` counts a
    subgraph and recomputes them when it is time.
    """

    def __init__(self, indptr: np.ndarray, prior_loss: np.ndarray, prior_alpha: np.ndarray, train_mask: np.ndarray,
                 strength: float, max_interval: int = DEFAULT_MAX_INTERVAL, max_subgraphs: int = 0,
                 arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        num_nodes = indptr.size - 1
        if prior_loss.shape != (num_nodes,) or prior_alpha.shape != (int(indptr[-1]),):
            raise InvalidArgument(f"online normalization: prior shapes {prior_loss.shape} and {prior_alpha.shape} "
                                  f"do not fit a graph of {num_nodes} nodes and {int(indptr[-1])} edges")
        if max_interval < 1:
            raise InvalidArgument(f"online normalization: max_interval must be >= 1, got {max_interval}")
        if max_subgraphs < 0:
            raise InvalidArgument(f"online normalization: max_subgraphs must be >= 0, got {max_subgraphs}")
        self.indptr = indptr
        self.max_subgraphs = int(max_subgraphs)
        self.strength = float(strength)
        self.max_interval = int(max_interval)
        self.train_nodes = np.flatnonzero(train_mask).astype(np.int64) if train_mask.size else None
        num_train = self.train_nodes.size if self.train_nodes is not None else num_nodes
        # p0 back from the prior's loss coefficients; only training nodes need it (the others weigh 0).
        loss64 = np.asarray(prior_loss, dtype=np.float64)
        with np.errstate(divide="ignore"):
            self.prior_p = np.where(loss64 > 0, 1.0 / (loss64 * max(num_train, 1)), 0.0)
        self.prior_alpha = np.ascontiguousarray(prior_alpha, dtype=np.float32)
        if arrays is None:
            self.loss = np.array(prior_loss, dtype=np.float32)  # private, writable: refreshed in place
            self.alpha = self.prior_alpha.copy()
            self.node_counts = np.zeros(num_nodes, dtype=np.int32)
            self.edge_counts = np.zeros(self.alpha.size, dtype=np.int32)
        else:
            self.loss, self.alpha, self.node_counts, self.edge_counts = arrays
            if (self.loss.shape, self.node_counts.shape) != ((num_nodes,),) * 2 or \
                    (self.alpha.shape, self.edge_counts.shape) != (self.prior_alpha.shape,) * 2:
                raise InvalidArgument("online normalization: the given arrays do not fit the graph")
        self.subgraphs = 0
        self.refreshes = 0
        self._next_refresh = 1

    def observe(self, node_ids: np.ndarray, eids: np.ndarray) -> bool:
        """Count one produced subgraph (its node ids and its entries' CSR positions); True when the
        coefficients were recomputed after it. Nothing is counted once :attr:`converged`."""
        if self.converged:
            return False
        count_subgraph(self.node_counts, self.edge_counts, node_ids, eids)
        self.subgraphs += 1
        if self.subgraphs == self.max_subgraphs:
            self.refresh()  # the final coefficients
            return True
        if self.subgraphs < self._next_refresh:
            return False
        self.refresh()
        self._next_refresh = self.subgraphs + min(self.subgraphs, self.max_interval)
        return True

    @property
    def converged(self) -> bool:
        """Whether ``max_subgraphs`` were counted (the coefficients no longer change)."""
        return 0 < self.max_subgraphs <= self.subgraphs

    def refresh(self) -> None:
        """Recompute ``loss`` and ``alpha`` in place from the counts so far."""
        smoothed_coefficients(self.indptr, self.node_counts, self.edge_counts, self.subgraphs, self.prior_p,
                              self.prior_alpha, train_nodes=self.train_nodes, strength=self.strength,
                              loss_out=self.loss, alpha_out=self.alpha)
        self.refreshes += 1
