"""Normalization coefficients stored with a dataset: ``DATASET_DIR/norm/<config_key>/``.

GraphSAINT's coefficients depend only on the graph, the training nodes, the
sampler configuration, the number of pre-sampled subgraphs and their seed, and
estimating them is the slow part of starting a job; so they are kept in the
dataset directory, one folder per sampler configuration
(:func:`~saintpipe.services.sampler.config.config_key`)::

    norm/<config_key>/loss_coefficients.npy         float32 [N]
    norm/<config_key>/aggregator_coefficients.npy   float32 [E]
    norm/<config_key>/meta.json                      the settings below, and the sampler config

A folder is written atomically (:func:`saintpipe.core.atomic.replacing_dir`)
and reused only when its ``meta.json`` matches the wanted settings
(:func:`normalization_meta`); otherwise it is estimated again and replaced.

Two producers share this format: :func:`load_or_estimate` (estimates in this
process, with the kernels' pinned worker processes) and the sampler service
(:mod:`saintpipe.services.sampler_service.normalization`: pre-sampling spread
over its Ray workers). Either reuses what the other stored. The estimation
itself is the kernels' (:mod:`saintpipe.services.sampler.normalization`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
from saintpipe.services.dataset.norm_files import FILES, META_NAME, NORM_DIR, read_stored, store_key, train_digest
from saintpipe.services.dataset.store import Dataset, open_dataset
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import SamplerConfigModel, config_key
from saintpipe.services.sampler.normalization import estimate_normalization

from saintpipe.core.atomic import replacing_dir
from saintpipe.core.errors import DatasetError

log = logging.getLogger(__name__)


def norm_dir(dataset_dir: Path | str, config: SamplerConfigModel, method: str = "reference") -> Path:
    """Where the normalization of ``config`` made by ``method`` lives in a dataset directory."""
    return Path(dataset_dir) / NORM_DIR / store_key(config_key(config), method)


def normalization_meta(dataset: Dataset, config: SamplerConfigModel, num_subgraphs: int, seed: int,
                       train_nodes: np.ndarray | None = None, method: str = "reference") -> dict:
    """The settings a stored normalization must have been made with to be reused.

    ``train_nodes`` default: the dataset's ``train`` split. ``config_key`` is the
    folder's name (:func:`~saintpipe.services.dataset.norm_files.store_key`), which
    trainers inducing node sets check.
    """
    if train_nodes is None:
        train_nodes = dataset.splits["train"]
    return {"config_key": store_key(config_key(config), method), "method": method,
            "num_subgraphs": int(num_subgraphs), "seed": int(seed),
            "num_nodes": int(dataset.num_nodes), "num_edges": int(dataset.num_edges),
            "train_nodes": train_digest(train_nodes)}


def load_normalization(directory: Path) -> tuple[Normalization, dict]:
    """Read a stored normalization (memory-mapped) and its metadata.

    Raises:
        DatasetError: naming the file that is missing or unreadable.
    """
    loss, aggregator, meta = read_stored(directory)
    method = str(meta.get("method", "reference"))
    key = str(meta["config_key"])
    norm = Normalization(loss_coefficients=loss, aggregator_coefficients=aggregator,
                         num_subgraphs=int(meta["num_subgraphs"]), config_key=key.removesuffix(f".{method}"),
                         seed=int(meta["seed"]), method=method, strength=float(meta.get("strength", 0.0)))
    return norm, meta


def save_normalization(directory: Path, norm: Normalization, meta: dict) -> None:
    """Write ``norm`` and ``meta`` to ``directory`` atomically: a temporary sibling renamed into place."""
    with replacing_dir(directory) as tmp:
        np.save(tmp / FILES[0], norm.loss_coefficients, allow_pickle=False)
        np.save(tmp / FILES[1], norm.aggregator_coefficients, allow_pickle=False)
        (tmp / META_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True))


def load_stored(dataset: Dataset, config: SamplerConfigModel, num_subgraphs: int, seed: int,
                train_nodes: np.ndarray | None = None, method: str = "reference") -> Normalization | None:
    """The stored normalization made with exactly these settings, or None (absent, other settings, unreadable)."""
    directory = norm_dir(dataset.path, config, method)
    if not (directory / META_NAME).is_file():
        return None
    try:
        norm, meta = load_normalization(directory)
    except DatasetError as exc:
        log.warning("ignoring unreadable normalization: %s", exc)
        return None
    wanted = normalization_meta(dataset, config, num_subgraphs, seed, train_nodes, method)
    if method == "reference":
        wanted.pop("method")  # folders stored before the other estimators existed have no method
    if all(meta.get(k) == v for k, v in wanted.items()):
        return norm
    log.info("stored normalization %s was made with other settings", directory)
    return None


def store_normalization(dataset: Dataset, config: SamplerConfigModel, norm: Normalization,
                        train_nodes: np.ndarray | None = None) -> bool:
    """Store ``norm`` (made for ``config``) with the dataset; False (logged) where the directory is read-only."""
    directory = norm_dir(dataset.path, config, norm.method)
    meta = {**normalization_meta(dataset, config, norm.num_subgraphs, norm.seed, train_nodes, norm.method),
            "config": config.model_dump(mode="json"), "strength": float(norm.strength)}
    try:
        save_normalization(directory, norm, meta)
    except OSError as exc:
        log.warning("could not store normalization in %s (%s); using it unsaved", directory, exc)
        return False
    log.info("stored normalization in %s", directory)
    return True


def load_or_estimate(dataset: Dataset | Path | str, config: SamplerConfigModel, num_subgraphs: int, *,
                     seed: int = 0, processes: int | None = None,
                     train_nodes: np.ndarray | None = None) -> Normalization:
    """The dataset's stored normalization for ``config``, estimated and stored first if needed.

    Args:
        dataset: an opened :class:`~saintpipe.services.dataset.store.Dataset` or its directory.
        config: the sampler configuration (its :func:`config_key` names the stored copy).
        num_subgraphs, seed, processes: as for
            :func:`~saintpipe.services.sampler.normalization.estimate_normalization`.
        train_nodes: default: the dataset's ``train`` split.

    A stored copy is reused when it was made with the same subgraph count, seed
    and training nodes; otherwise it is re-estimated and replaced. When the
    dataset directory is read-only the estimate is returned without storing it.
    """
    if not hasattr(dataset, "indptr"):  # a directory
        dataset = open_dataset(dataset)
    if train_nodes is None:
        train_nodes = dataset.splits["train"]
    stored = load_stored(dataset, config, num_subgraphs, seed, train_nodes)
    if stored is not None:
        log.info("reusing normalization %s", norm_dir(dataset.path, config))
        return stored
    norm = estimate_normalization(dataset.indptr, dataset.indices, config, num_subgraphs=num_subgraphs,
                                  train_nodes=train_nodes, seed=seed, processes=processes)
    store_normalization(dataset, config, norm, train_nodes)
    return norm
