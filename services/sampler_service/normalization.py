"""GraphSAINT's normalization for the sampler service: computed, estimated by the workers, or stored.

By estimator (``[samplers] normalization``, docs/explanation/trainer.md):

* ``exact`` (node and edge samplers): closed-form inclusion probabilities, one pass over the graph in the
  supervisor.
* ``online``: the prior, refined from the subgraphs the workers produce, in one state per host that the
  supervisor refreshes (:func:`share_online`, :mod:`saintpipe.services.sampler.online_shared`; a worker
  that cannot see it refines its own copy). Training starts at once.
* ``smoothed`` and ``reference``: counts of pre-sampled subgraphs. Each worker draws a contiguous share
  and returns its counts, which the supervisor sums. Subgraph ``i`` uses the seed of the kernels' serial
  estimate (:func:`~saintpipe.services.sampler.normalization.count_presamples`), so the coefficients do
  not depend on the number of workers.

What takes time to make (exact, smoothed, reference) is stored with the dataset
(:mod:`saintpipe.services.dataset.normalization`), where trainers that induce node sets read it and a
later job with the same settings reuses it; on the training graph, apart from the full graph's
(:func:`~saintpipe.services.dataset.normalization.store_key`). Online coefficients are not stored.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np
import ray

from saintpipe.core.bars import ProgressBar
from saintpipe.core.errors import SaintpipeError, WorkerFailed
from saintpipe.core.report import plural
from saintpipe.services.dataset.normalization import graph_norm_dir, load_stored, store_normalization
from saintpipe.services.dataset.sample_graph import SampleGraph, as_sample_graph
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import SamplerConfigModel, config_key
from saintpipe.services.sampler.online_shared import OnlineRefresher, SharedOnlineState
from saintpipe.services.sampler.online_shared import remove_leftovers as remove_shared_leftovers
from saintpipe.services.sampler.sampler import train_mask
from saintpipe.services.sampler_service.slots import split_range

if TYPE_CHECKING:
    from saintpipe.services.dataset.store import Dataset
    from saintpipe.services.sampler_service.worker import SamplerWorker

log = logging.getLogger(__name__)


def ensure_normalization(dataset: "Dataset | SampleGraph", config: SamplerConfigModel,
                         workers: Sequence["SamplerWorker"], num_subgraphs: int, seed: int, *,
                         method: str = "reference", strength: float | None = None
                         ) -> tuple[Normalization | None, bool]:
    """The normalization for this graph, sampler config and estimator: stored, or made (and stored).

    Args:
        dataset: the graph the workers sample (:class:`SampleGraph`), or an opened dataset (its full graph).
        method: ``exact``, ``online``, ``smoothed``, ``reference`` or ``none`` (see the module docstring).
        num_subgraphs, seed: the pre-sampling's (smoothed and reference); online: the subgraphs each worker
            counts before its coefficients stay as they are.
        strength: the prior's weight (smoothed and online); None: the estimator's default.

    Returns:
        ``(normalization, reused)``; ``(None, False)`` for ``none`` or ``num_subgraphs`` 0 with a pre-sampling
        estimator.
    """
    from saintpipe.services.sampler.normalization import (
        DEFAULT_STRENGTH,
        closed_form_coefficients,
        coefficients_from_counts,
        smoothed_coefficients,
    )
    from saintpipe.services.sampler.inclusion import inclusion_probabilities

    strength = DEFAULT_STRENGTH if strength is None else float(strength)
    presampled = method in ("smoothed", "reference")
    if method == "none" or (presampled and num_subgraphs == 0):
        return None, False
    graph = as_sample_graph(dataset)
    train = graph.train_nodes
    key = config_key(config)
    if method == "online":
        # Each worker counts as many subgraphs as the pre-pass would draw, then keeps its coefficients.
        loss, alpha = closed_form_coefficients(graph.indptr, graph.indices, config, train)
        log.info("online normalization: training starts on the prior of the %s sampler; each worker refines it "
                 "from its first %d subgraphs", config.kind, num_subgraphs)
        return Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, num_subgraphs=num_subgraphs,
                             config_key=key, method="online", strength=strength), False
    if not presampled:
        num_subgraphs, seed = 0, 0
    stored = load_stored(graph, config, num_subgraphs, seed, method=method)
    if stored is not None and (method != "smoothed" or stored.strength == strength):
        log.info("reusing the normalization stored in %s", graph_norm_dir(graph, config, method))
        return stored, True
    if method == "exact":
        loss, alpha = closed_form_coefficients(graph.indptr, graph.indices, config, train)
    else:
        node_counts, edge_counts = _presample_counts(graph, config, workers, num_subgraphs, seed)
        if method == "reference":
            loss, alpha = coefficients_from_counts(np.asarray(graph.indptr), node_counts, edge_counts,
                                                   num_subgraphs, train)
        else:
            prior_p, prior_alpha = inclusion_probabilities(config, graph.indptr, graph.indices)
            loss, alpha = smoothed_coefficients(graph.indptr, node_counts, edge_counts, num_subgraphs, prior_p,
                                                prior_alpha, train_nodes=train, strength=strength)
    norm = Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, num_subgraphs=num_subgraphs,
                         config_key=key, seed=seed, method=method,
                         strength=strength if method == "smoothed" else 0.0)
    store_normalization(graph, config, norm)
    return norm, False


def _presample_counts(graph: SampleGraph, config: SamplerConfigModel, workers: Sequence["SamplerWorker"],
                      num_subgraphs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(C(v), C(u, v))`` of ``num_subgraphs`` pre-sampled subgraphs, drawn by the workers in shares."""
    shares = [(w, a, b) for w, (a, b) in zip(workers, split_range(num_subgraphs, len(workers))) if b > a]
    refs = {w.presample_async(a, b, seed): b - a for w, a, b in shares}
    node_counts = np.zeros(graph.num_nodes, dtype=np.int64)
    edge_counts = np.zeros(graph.num_edges, dtype=np.int64)
    pending = list(refs)
    with ProgressBar(total=num_subgraphs, desc=f"pre-sampling {config.kind} on {plural(len(shares), 'worker')}",
                     leave=False) as bar:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                nodes, edges = ray.get(done[0])
            except ray.exceptions.RayTaskError as exc:  # the worker's own error, as one clear line
                cause = getattr(exc, "cause", None)
                raise cause if isinstance(cause, SaintpipeError) else WorkerFailed(
                    f"pre-sampling for the normalization failed in a worker: {cause or exc}") from None
            node_counts += nodes
            edge_counts += edges
            bar.update(refs[done[0]])
    return node_counts, edge_counts


@dataclasses.dataclass
class SharedOnline:
    """The online state the supervisor shares with this host's workers, and the thread that refreshes it."""

    state: SharedOnlineState
    normalization: Normalization  # the prior, naming the state for the workers
    refresher: OnlineRefresher | None = None

    def start(self, graph: SampleGraph, prior: Normalization) -> None:
        """Refresh the shared coefficients from now on, against ``prior``'s (the object store's copy)."""
        mask = (train_mask(graph.train_nodes, graph.num_nodes) if graph.train_nodes is not None
                else np.empty(0, dtype=np.uint8))
        self.refresher = OnlineRefresher(self.state, graph.indptr, prior.loss_coefficients,
                                         prior.aggregator_coefficients, mask, prior.strength).start()

    def close(self) -> None:
        """Stop refreshing and remove the file (workers that still map it keep their mapping)."""
        if self.refresher is not None:
            self.refresher.stop()
        self.state.unlink()
        self.state.close()


def share_online(norm: Normalization) -> SharedOnline | None:
    """Put the online prior in a state file for this host's workers (:meth:`SharedOnline.start` then
    refreshes it).

    None (every worker then keeps its own state) when the file cannot be made: no writable ``/dev/shm``,
    or too little room there for the per-edge arrays.
    """
    remove_shared_leftovers()
    try:
        state = SharedOnlineState.create(norm.loss_coefficients, norm.aggregator_coefficients, norm.num_subgraphs)
    except OSError as exc:
        log.warning("online normalization: cannot share the state among the workers (%s); each keeps its own",
                    exc.strerror or exc)
        return None
    log.info("online normalization: the workers of this host share %s", state.path)
    return SharedOnline(state, dataclasses.replace(norm, shared_state=state.name))
