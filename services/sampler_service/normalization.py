"""GraphSAINT's normalization, estimated by the sampler workers in parallel before training.

The coefficients need ``C(v)`` and ``C(u, v)``: how many of ``num_subgraphs``
pre-sampled subgraphs contain each node and each edge. Each worker draws a
contiguous share of the pre-sampling subgraphs and returns its counts; the
supervisor sums them, turns them into coefficients and stores them once per
dataset and sampler configuration, in the dataset's format
(:mod:`saintpipe.services.dataset.normalization`: ``DATASET/norm/<config_key>/``). Subgraph
``i`` uses the same seed as the kernels' serial estimate
(:func:`~saintpipe.services.sampler.normalization.count_presamples`), so the stored
coefficients are the same whatever the number of workers, and a later
``load_or_estimate`` with the same settings reuses them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np
import ray
from tqdm import tqdm

from saintpipe.core.errors import SaintpipeError, WorkerFailed
from saintpipe.services.dataset.normalization import load_stored, norm_dir, store_normalization
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import SamplerConfigModel, config_key
from saintpipe.services.sampler.normalization import coefficients_from_counts
from saintpipe.services.sampler_service.seeds import split_range

if TYPE_CHECKING:
    from saintpipe.services.dataset.store import Dataset
    from saintpipe.services.sampler_service.worker import SamplerWorker

log = logging.getLogger(__name__)


def ensure_normalization(dataset: "Dataset", config: SamplerConfigModel, workers: Sequence["SamplerWorker"],
                         num_subgraphs: int, seed: int) -> tuple[Normalization | None, bool]:
    """The normalization for this dataset and sampler config: stored, or estimated by ``workers`` and stored.

    Returns:
        ``(normalization, reused)``; ``(None, False)`` when ``num_subgraphs`` is 0 (no normalization).
    """
    if num_subgraphs == 0:
        return None, False
    stored = load_stored(dataset, config, num_subgraphs, seed)
    if stored is not None:
        log.info("reusing the normalization stored in %s", norm_dir(dataset.path, config))
        return stored, True
    shares = [(w, a, b) for w, (a, b) in zip(workers, split_range(num_subgraphs, len(workers))) if b > a]
    refs = {w.presample_async(a, b, seed): b - a for w, a, b in shares}
    node_counts = np.zeros(dataset.num_nodes, dtype=np.int64)
    edge_counts = np.zeros(dataset.num_edges, dtype=np.int64)
    pending = list(refs)
    with tqdm(total=num_subgraphs, desc=f"pre-sampling {config.kind} on {len(shares)} workers", leave=False) as bar:
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
    loss, alpha = coefficients_from_counts(np.asarray(dataset.indptr), node_counts, edge_counts, num_subgraphs,
                                           dataset.splits["train"])
    norm = Normalization(loss_coefficients=loss, aggregator_coefficients=alpha, num_subgraphs=num_subgraphs,
                         config_key=config_key(config), seed=seed)
    store_normalization(dataset, config, norm)
    return norm, False
