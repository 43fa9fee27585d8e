"""Normalization coefficients stored with a dataset: ``DATASET_DIR/norm/<config_key>/``.

Estimating GraphSAINT's coefficients is the slow part of starting a job, and they depend only on the
graph, the training nodes, the sampler configuration and the pre-sampling's size and seed; so they are
kept in the dataset directory, one folder per sampler configuration
(:func:`~saintpipe.services.sampler.config.config_key`)::

    norm/<config_key>/loss_coefficients.npy         float32 [N]
    norm/<config_key>/aggregator_coefficients.npy   float32 [E]
    norm/<config_key>/meta.json                      the settings below, and the sampler config

Coefficients made on the training graph index that graph's nodes and CSR positions, so they live in
their own folder (``<config_key>.train``, :func:`store_key`). A folder is written atomically and reused
only when its ``meta.json`` matches the wanted settings (:func:`normalization_meta`); otherwise it is
estimated again and replaced. :func:`load_or_estimate` (estimates in this process) and the sampler
service (:mod:`saintpipe.services.sampler_service.normalization`, pre-sampling over its Ray workers) each
reuse what the other stored; a consumer that only reads uses :func:`read_stored`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
from saintpipe.services.dataset.sample_graph import SampleGraph, as_sample_graph, train_digest
from saintpipe.services.dataset.store import Dataset, open_dataset
from saintpipe.services.sampler.coefficients import Normalization
from saintpipe.services.sampler.config import SamplerConfigModel, config_key
from saintpipe.services.sampler.normalization import estimate_normalization

from saintpipe.core.atomic import replacing_dir
from saintpipe.core.errors import DatasetError

NORM_DIR = "norm"
META_NAME = "meta.json"
LOSS_FILE = "loss_coefficients.npy"  # float32 [N] (training graph: [n], its local ids)
AGGREGATOR_FILE = "aggregator_coefficients.npy"  # float32 [E], alpha at the sampled graph's CSR positions
FILES = (LOSS_FILE, AGGREGATOR_FILE)


def store_key(config_key: str, method: str = "reference", graph: str = "full") -> str:
    """The folder name of a stored normalization: the sampler config's key, plus the estimator unless it is
    GraphSAINT's reference (whose folders keep the plain key, as stored before the other estimators existed),
    plus ``.train`` when it was made on the training graph (its arrays index that graph's nodes and CSR
    positions, not the full graph's: ``meta.json`` then says ``graph: train``)."""
    key = config_key if method == "reference" else f"{config_key}.{method}"
    return key if graph == "full" else f"{key}.{graph}"


def read_stored(directory: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(loss_coefficients, aggregator_coefficients, meta)`` of a stored normalization, memory-mapped.

    Raises:
        DatasetError: naming the file that is missing or unreadable.
    """
    meta_path = directory / META_NAME
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise DatasetError(f"{meta_path}: not found") from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{meta_path}: unreadable: {exc}") from None
    if not isinstance(meta, dict):
        raise DatasetError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
    arrays = []
    for name in FILES:
        try:
            # A plain ndarray over the map, not an np.memmap: pickle (Ray's object store) sends an np.memmap
            # in-band, so every sampler worker unpickled a private copy (1.1 GB of coefficients per worker at
            # Kronecker scale 24); a plain array travels out-of-band and is mapped zero-copy by each worker.
            arrays.append(np.asarray(np.load(directory / name, mmap_mode="r", allow_pickle=False)))
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{directory / name}: unreadable: {exc}") from None
    return arrays[0], arrays[1], meta


log = logging.getLogger(__name__)


def norm_dir(dataset_dir: Path | str, config: SamplerConfigModel, method: str = "reference",
             graph: str = "full") -> Path:
    """Where the normalization of ``config`` made by ``method`` on ``graph`` lives in a dataset directory."""
    return Path(dataset_dir) / NORM_DIR / store_key(config_key(config), method, graph)


def graph_norm_dir(graph: Dataset | SampleGraph, config: SamplerConfigModel, method: str = "reference") -> Path:
    """:func:`norm_dir` of a dataset (its full graph) or of a :class:`SampleGraph`."""
    graph = as_sample_graph(graph)
    return norm_dir(graph.path, config, method, graph.kind)


def normalization_meta(dataset: Dataset | SampleGraph, config: SamplerConfigModel, num_subgraphs: int, seed: int,
                       train_nodes: np.ndarray | None = None, method: str = "reference") -> dict:
    """The settings a stored normalization must have been made with to be reused.

    ``train_nodes`` default: the dataset's ``train`` split. ``config_key`` is the
    folder's name (:func:`~saintpipe.services.dataset.normalization.store_key`), which
    trainers inducing node sets check. ``num_nodes`` and ``num_edges`` are the
    dataset's full graph's (what a node set's ids index); on the training graph,
    ``graph_nodes`` and ``graph_edges`` give its size (the arrays' lengths).
    """
    graph = as_sample_graph(dataset)
    digest = graph.train_digest if train_nodes is None else train_digest(train_nodes)
    meta = {"config_key": store_key(config_key(config), method, graph.kind), "method": method,
            "num_subgraphs": int(num_subgraphs), "seed": int(seed),
            "num_nodes": int(graph.dataset_nodes), "num_edges": int(graph.dataset_edges),
            "train_nodes": digest}
    if graph.kind != "full":
        meta.update(graph=graph.kind, graph_nodes=graph.num_nodes, graph_edges=graph.num_edges)
    return meta


def load_normalization(directory: Path) -> tuple[Normalization, dict]:
    """Read a stored normalization (memory-mapped) and its metadata.

    Raises:
        DatasetError: naming the file that is missing or unreadable.
    """
    loss, aggregator, meta = read_stored(directory)
    method = str(meta.get("method", "reference"))
    key = str(meta["config_key"]).removesuffix(f".{meta.get('graph', 'full')}")
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


def load_stored(dataset: Dataset | SampleGraph, config: SamplerConfigModel, num_subgraphs: int, seed: int,
                train_nodes: np.ndarray | None = None, method: str = "reference") -> Normalization | None:
    """The stored normalization made with exactly these settings, or None (absent, other settings, unreadable).

    ``dataset``: an opened dataset (its full graph) or the :class:`SampleGraph` the samplers draw from.
    """
    directory = graph_norm_dir(dataset, config, method)
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


def store_normalization(dataset: Dataset | SampleGraph, config: SamplerConfigModel, norm: Normalization,
                        train_nodes: np.ndarray | None = None) -> bool:
    """Store ``norm`` (made for ``config``) with the dataset; False (logged) where the directory is read-only."""
    directory = graph_norm_dir(dataset, config, norm.method)
    meta = {**normalization_meta(dataset, config, norm.num_subgraphs, norm.seed, train_nodes, norm.method),
            "config": config.model_dump(mode="json"), "strength": float(norm.strength)}
    try:
        save_normalization(directory, norm, meta)
    except OSError as exc:
        log.warning("could not store normalization in %s (%s); using it unsaved", directory, exc)
        return False
    log.info("stored normalization in %s", directory)
    return True


def load_or_estimate(dataset: Dataset | SampleGraph | Path | str, config: SamplerConfigModel, num_subgraphs: int,
                     *, seed: int = 0, processes: int | None = None,
                     train_nodes: np.ndarray | None = None) -> Normalization:
    """The dataset's stored normalization for ``config``, estimated and stored first if needed.

    Args:
        dataset: an opened :class:`~saintpipe.services.dataset.store.Dataset` (its full graph), its
            directory, or the :class:`SampleGraph` to estimate on (the training graph).
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
    graph = as_sample_graph(dataset)
    if train_nodes is None:
        train_nodes = graph.train_nodes
    elif graph.kind != "full":
        raise ValueError("train_nodes: the training graph's nodes all train; give none")
    # The digest in meta.json is the dataset split's (on the training graph every node trains).
    digest_of = train_nodes if graph.kind == "full" else None
    stored = load_stored(graph, config, num_subgraphs, seed, digest_of)
    if stored is not None:
        log.info("reusing normalization %s", graph_norm_dir(graph, config))
        return stored
    norm = estimate_normalization(graph.indptr, graph.indices, config, num_subgraphs=num_subgraphs,
                                  train_nodes=train_nodes, seed=seed, processes=processes)
    store_normalization(graph, config, norm, digest_of)
    return norm
