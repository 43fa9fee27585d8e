"""GraphSAINT normalization: aggregator coefficients alpha and loss coefficients.

Four estimators (:data:`NORMALIZATION_METHODS`, :func:`build_normalization`; docs/explanation/trainer.md,
"Normalization"): ``exact`` (the node and edge samplers' closed forms,
:mod:`saintpipe.services.sampler.inclusion`; nothing is drawn), ``prior`` (the same closed forms, an
approximation for random walk and frontier), ``smoothed`` (counts of pre-sampled subgraphs shrunk toward
the prior, :func:`smoothed_coefficients`) and ``reference``, GraphSAINT's own estimate:

Before training, ``num_subgraphs`` subgraphs are drawn with the job's sampler configuration (in
parallel, one pinned process per core) and every node and edge (full-graph CSR position) counts how many
contain it, ``C(v)`` and ``C(u, v)``. As in GraphSAINT's reference implementation:

* aggregator: ``alpha(u, v) = C(u, v) / C(v)`` at the CSR position of entry (row v, column u); the
  subgraph weight of that entry is ``1 / (deg(v) * alpha)``. ``1/alpha`` is clipped to at most 1e4
  (alpha >= 1e-4, which covers edges never sampled) and set to 0.1 where ``C(v) = 0`` (alpha = 10).
* loss: ``lambda(v) = num_subgraphs / (C(v) * |V_train|)`` for training nodes (``C(v) = 0`` counted as
  0.1), 0 for the others, so that ``sum_v lambda(v) * L(v)`` estimates the mean training loss.

Pure estimation: arrays in, :class:`~saintpipe.services.sampler.coefficients.Normalization` out. Storing
it with a dataset is :mod:`saintpipe.services.dataset.normalization`; the sampler service spreads the
pre-sampling over its workers (:mod:`saintpipe.services.sampler_service.normalization`).
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import SamplerConfigModel, config_key
from saintpipe.services.sampler.inclusion import inclusion_probabilities, is_exact
from saintpipe.services.sampler.parallel import WorkerContext, run_pinned, stream_seed
from saintpipe.services.sampler.sampler import Sampler, make_sampler, train_mask
from saintpipe.services.sampler.smoothed import DEFAULT_STRENGTH, smoothed_coefficients

__all__ = ["ALPHA_MIN", "ALPHA_UNSEEN", "DEFAULT_STRENGTH", "NORMALIZATION_METHODS", "PRESAMPLE_STREAM",
           "UNSEEN_COUNT", "Normalization", "build_normalization", "closed_form_coefficients",
           "coefficients_from_counts", "count_presamples", "count_samples", "estimate_normalization",
           "presample_count", "smoothed_coefficients", "subgraph_node_bound"]

log = logging.getLogger(__name__)

# spawn_key tag of the pre-sampling stream, so it never repeats a training job's subgraphs.
PRESAMPLE_STREAM = 0x5A1E7
ALPHA_MIN = 1e-4
ALPHA_UNSEEN = 10.0
UNSEEN_COUNT = 0.1
_REPORT_EVERY = 16
NORMALIZATION_METHODS = ("exact", "prior", "smoothed", "reference")


def count_presamples(sampler: Sampler, start: int, stop: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw pre-sampling subgraphs ``[start, stop)``; return ``(C(v) int32 [N], C(u, v) int32 [E])``.

    Subgraph ``i`` uses ``stream_seed(seed, PRESAMPLE_STREAM, i)``, as in
    :func:`count_samples`, so shares drawn by different workers add up to the
    same counts as one serial pass.
    """
    node_counts = np.zeros(sampler.num_nodes, dtype=np.int32)
    edge_counts = np.zeros(sampler.num_edges, dtype=np.int32)
    for i in range(start, stop):
        subgraph, eids = sampler.sample_arrays(stream_seed(seed, PRESAMPLE_STREAM, i))
        node_counts[subgraph.node_ids] += 1  # ids and CSR positions are distinct within one subgraph
        edge_counts[eids] += 1
    return node_counts, edge_counts


def count_samples(indptr: np.ndarray, indices: np.ndarray, config: SamplerConfigModel, *, num_subgraphs: int,
                  seed: int = 0, processes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pre-sample and count: ``(C(v) int64 [N], C(u, v) int64 [E])``.

    Subgraph ``i`` uses ``stream_seed(seed, PRESAMPLE_STREAM, i)`` whichever
    worker draws it, so the counts do not depend on the number of processes.
    """
    if num_subgraphs < 1:
        raise InvalidArgument(f"num_subgraphs must be >= 1, got {num_subgraphs}")
    sampler = make_sampler(config, indptr, indices)
    num_nodes, num_edges = sampler.num_nodes, sampler.num_edges

    def work(ctx: WorkerContext) -> tuple[np.ndarray, np.ndarray]:
        node_counts = np.zeros(num_nodes, dtype=np.int32)
        edge_counts = np.zeros(num_edges, dtype=np.int32)
        pending = 0
        for i in range(ctx.worker, num_subgraphs, ctx.num_workers):
            subgraph, eids = sampler.sample_arrays(stream_seed(seed, PRESAMPLE_STREAM, i))
            node_counts[subgraph.node_ids] += 1  # ids and positions are distinct within a subgraph
            edge_counts[eids] += 1
            pending += 1
            if pending == _REPORT_EVERY:
                ctx.report(pending)
                pending = 0
        ctx.report(pending)
        return node_counts, edge_counts

    processes = min(processes or len(os.sched_getaffinity(0)), num_subgraphs)
    node_total = np.zeros(num_nodes, dtype=np.int64)
    edge_total = np.zeros(num_edges, dtype=np.int64)
    parts = run_pinned(work, processes, progress_total=num_subgraphs,
                       progress_desc=f"pre-sampling {config.kind}", fork_single=False)
    for node_counts, edge_counts in parts:
        node_total += node_counts
        edge_total += edge_counts
    return node_total, edge_total


def coefficients_from_counts(indptr: np.ndarray, node_counts: np.ndarray, edge_counts: np.ndarray,
                             num_subgraphs: int, train_nodes: np.ndarray | None = None
                             ) -> tuple[np.ndarray, np.ndarray]:
    """GraphSAINT's ``(loss float32 [N], alpha float32 [E])`` from the counts (see the module docstring)."""
    num_nodes = indptr.size - 1
    rows = np.repeat(np.arange(num_nodes, dtype=np.int32), np.diff(indptr))
    c_row = node_counts.astype(np.float64)[rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = edge_counts / c_row
    alpha = np.maximum(alpha, ALPHA_MIN)
    alpha[c_row == 0] = ALPHA_UNSEEN
    counts = node_counts.astype(np.float64)
    counts[counts == 0] = UNSEEN_COUNT
    mask = np.ones(num_nodes, dtype=bool) if train_nodes is None else train_mask(train_nodes, num_nodes).astype(bool)
    num_train = int(mask.sum())
    loss = np.zeros(num_nodes, dtype=np.float64)
    if num_train:
        loss[mask] = num_subgraphs / counts[mask] / num_train
    return loss.astype(np.float32), alpha.astype(np.float32)


def estimate_normalization(indptr: np.ndarray, indices: np.ndarray, config: SamplerConfigModel, *,
                           num_subgraphs: int, train_nodes: np.ndarray | None = None, seed: int = 0,
                           processes: int | None = None) -> Normalization:
    """Estimate GraphSAINT's coefficients by pre-sampling ``num_subgraphs`` subgraphs on all cores.

    Args:
        indptr, indices: the full graph.
        config: the sampler configuration the job trains with.
        num_subgraphs: subgraphs to pre-sample (GraphSAINT draws enough to cover each
            training node tens of times).
        train_nodes: training node ids (loss coefficients are 0 elsewhere); None: all nodes.
        seed: the pre-sampling seed. processes: workers (default one per core).

    Raises:
        InvalidArgument: bad counts, ids or graph.
    """
    node_counts, edge_counts = count_samples(indptr, indices, config, num_subgraphs=num_subgraphs,
                                             seed=seed, processes=processes)
    loss, alpha = coefficients_from_counts(np.asarray(indptr), node_counts, edge_counts, num_subgraphs,
                                           train_nodes)
    return Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, num_subgraphs=num_subgraphs,
                         config_key=config_key(config), seed=seed)


def subgraph_node_bound(config: SamplerConfigModel) -> int:
    """Most nodes one subgraph of this sampler configuration can hold."""
    from saintpipe.services.sampler.config import EdgeConfig, RandomWalkConfig

    if isinstance(config, RandomWalkConfig):
        return config.roots * (config.walk_length + 1)
    if isinstance(config, EdgeConfig):
        return 2 * config.edge_budget
    return config.node_budget  # frontier and node samplers


def presample_count(config: SamplerConfigModel, num_train: int, coverage: float = 100.0,
                    minimum: int = 50, maximum: int = 20_000) -> int:
    """Pre-sampled subgraphs so each training node is drawn ``coverage`` times on average.

    Few pre-samples leave most edges unseen, and an unseen edge gets
    GraphSAINT's floor alpha, i.e. a weight of about 1e4 / deg that swamps its
    row: on the demo, 50 pre-samples of 1000-root walks give aggregation rows
    summing to ~700 instead of ~1 and the loss explodes; coverage 100 gives
    rows summing to ~1 (GraphSAINT's own "sample coverage" rule).
    """
    per_subgraph = max(1, min(num_train, subgraph_node_bound(config)))
    return max(minimum, min(maximum, math.ceil(coverage * num_train / per_subgraph)))


def closed_form_coefficients(indptr: np.ndarray, indices: np.ndarray, config: SamplerConfigModel,
                             train_nodes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The prior's ``(loss float32 [N], alpha float32 [E])``: exact for the node and edge samplers.

    :func:`smoothed_coefficients` with no counts on
    :func:`~saintpipe.services.sampler.inclusion.inclusion_probabilities`.
    """
    prior_p, prior_alpha = inclusion_probabilities(config, indptr, indices)
    # alpha is already final: written over in place, it saves a second [E] array.
    return smoothed_coefficients(indptr, None, None, 0, prior_p, prior_alpha, train_nodes,
                                 alpha_out=prior_alpha)


def build_normalization(indptr: np.ndarray, indices: np.ndarray, config: SamplerConfigModel, *, method: str,
                        train_nodes: np.ndarray | None = None, num_subgraphs: int = 0, seed: int = 0,
                        processes: int | None = None, strength: float = DEFAULT_STRENGTH) -> Normalization:
    """The normalization of one graph and sampler configuration by one of :data:`NORMALIZATION_METHODS`.

    Args:
        method: ``exact`` (closed form; node and edge samplers only), ``prior`` (the closed forms or
            their approximation, any sampler), ``smoothed`` (``num_subgraphs`` pre-sampled, shrunk toward
            the prior; 0: the prior) or ``reference`` (GraphSAINT's floors, :func:`estimate_normalization`).
        num_subgraphs, seed, processes: the pre-sampling (smoothed and reference).
        strength: the prior's weight in subgraphs (smoothed).

    Raises:
        InvalidArgument: an unknown method, ``exact`` for a sampler without a closed form, bad counts or graph.
    """
    key = config_key(config)
    if method == "reference":
        return estimate_normalization(indptr, indices, config, num_subgraphs=num_subgraphs,
                                      train_nodes=train_nodes, seed=seed, processes=processes)
    if method not in NORMALIZATION_METHODS:
        raise InvalidArgument(f"unknown normalization method {method!r}; "
                              f"methods: {', '.join(NORMALIZATION_METHODS)}")
    if method == "exact" and not is_exact(config):
        raise InvalidArgument(f"no closed form for {config.kind}; use smoothed or online")
    if method in ("exact", "prior") or num_subgraphs == 0:
        loss, alpha = closed_form_coefficients(indptr, indices, config, train_nodes)
        return Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, config_key=key, method=method,
                             strength=strength if method == "smoothed" else 0.0)
    node_counts, edge_counts = count_samples(indptr, indices, config, num_subgraphs=num_subgraphs, seed=seed,
                                             processes=processes)
    prior_p, prior_alpha = inclusion_probabilities(config, indptr, indices)
    loss, alpha = smoothed_coefficients(indptr, node_counts, edge_counts, num_subgraphs, prior_p, prior_alpha,
                                        train_nodes, strength, alpha_out=prior_alpha)
    return Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, num_subgraphs=num_subgraphs,
                         config_key=key, seed=seed, method=method, strength=strength)
