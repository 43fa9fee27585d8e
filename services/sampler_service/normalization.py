"""GraphSAINT's normalization, estimated by the sampler workers in parallel before training.

The coefficients need ``C(v)`` and ``C(u, v)``: how many of ``num_subgraphs``
pre-sampled subgraphs contain each node and each edge. Each worker draws a
contiguous share of the pre-sampling subgraphs and returns its counts; the
supervisor sums them, turns them into coefficients and stores them once per
dataset and sampler configuration, in the sampler's own format
(:mod:`saintpipe.services.sampler.normalization`: ``DATASET/norm/<config_key>/``). Subgraph
``i`` uses the same seed as the sampler's serial estimate, so the stored
coefficients are the same whatever the number of workers, and a later
``load_or_estimate`` with the same settings reuses them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np
import ray
from tqdm import tqdm

from saintpipe.core.errors import DatasetError, SaintpipeError, WorkerFailed
from saintpipe.services.sampler.config import SamplerConfigModel, config_key
from saintpipe.services.sampler.normalization import (PRESAMPLE_STREAM, Normalization, _train_digest,
                                            coefficients_from_counts, load_normalization, norm_dir,
                                            save_normalization)
from saintpipe.services.sampler.parallel import stream_seed
from saintpipe.services.sampler_service.seeds import split_range

if TYPE_CHECKING:
    from saintpipe.services.dataset.store import Dataset
    from saintpipe.services.sampler.sampler import Sampler
    from saintpipe.services.sampler_service.worker import SamplerWorker

log = logging.getLogger(__name__)


def count_presamples(sampler: "Sampler", start: int, stop: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw pre-sampling subgraphs ``[start, stop)``; return ``(C(v) int32 [N], C(u, v) int32 [E])``."""
    node_counts = np.zeros(sampler.num_nodes, dtype=np.int32)
    edge_counts = np.zeros(sampler.num_edges, dtype=np.int32)
    for i in range(start, stop):
        subgraph, eids = sampler.sample_arrays(stream_seed(seed, PRESAMPLE_STREAM, i))
        node_counts[subgraph.node_ids] += 1  # ids and CSR positions are distinct within one subgraph
        edge_counts[eids] += 1
    return node_counts, edge_counts


def _wanted_meta(dataset: "Dataset", config: SamplerConfigModel, num_subgraphs: int, seed: int) -> dict:
    # The same fields load_or_estimate compares, so either side reuses what the other stored.
    return {"config_key": config_key(config), "num_subgraphs": int(num_subgraphs), "seed": int(seed),
            "num_nodes": int(dataset.num_nodes), "num_edges": int(dataset.num_edges),
            "train_nodes": _train_digest(dataset.splits["train"])}


def load_stored(dataset: "Dataset", config: SamplerConfigModel, num_subgraphs: int,
                seed: int) -> Normalization | None:
    """The stored normalization made with exactly these settings, or None."""
    directory = norm_dir(dataset.path, config)
    if not (directory / "meta.json").is_file():
        return None
    try:
        norm, meta = load_normalization(directory)
    except DatasetError as exc:
        log.warning("ignoring unreadable normalization: %s", exc)
        return None
    wanted = _wanted_meta(dataset, config, num_subgraphs, seed)
    return norm if all(meta.get(k) == v for k, v in wanted.items()) else None


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
    directory = norm_dir(dataset.path, config)
    try:
        save_normalization(directory, norm, {**_wanted_meta(dataset, config, num_subgraphs, seed),
                                             "config": config.model_dump(mode="json")})
        log.info("stored the normalization in %s", directory)
    except OSError as exc:
        log.warning("could not store the normalization in %s (%s); using it unsaved", directory, exc)
    return norm, False
