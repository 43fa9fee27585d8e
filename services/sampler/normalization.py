"""GraphSAINT normalization: aggregator coefficients alpha and loss coefficients, by pre-sampling.

Before training, ``num_subgraphs`` subgraphs are drawn with the job's sampler
configuration (in parallel, one pinned process per core) and every node and
every edge (full-graph CSR position) counts how many of them contain it:
``C(v)`` and ``C(u, v)``. Then, as in GraphSAINT's reference implementation:

* aggregator: ``alpha(u, v) = C(u, v) / C(v)`` at the CSR position of entry
  (row v, column u), the probability that the edge is sampled given that
  ``v`` is. The subgraph weight of that entry is ``1 / (deg(v) * alpha)``
  (the full graph's mean aggregator, made unbiased). GraphSAINT clips
  ``1/alpha`` to at most 1e4 (so alpha >= 1e-4, which covers edges never
  sampled) and sets it to 0.1 where ``C(v) = 0`` (alpha = 10).
* loss: ``lambda(v) = num_subgraphs / (C(v) * |V_train|)`` for training nodes
  (``C(v) = 0`` counted as 0.1), 0 for the others. The subgraph loss
  ``sum_v lambda(v) * L(v)`` then estimates the mean training loss.

Stored with the dataset under ``DATASET_DIR/norm/<config_key>/`` (written
atomically, reused by the next call with the same configuration, subgraph
count and seed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from saintpipe.core.errors import DatasetError, InvalidArgument
from saintpipe.services.sampler.config import SamplerConfigModel, config_key
from saintpipe.services.sampler.parallel import WorkerContext, run_pinned, stream_seed
from saintpipe.services.sampler.sampler import make_sampler, train_mask

if TYPE_CHECKING:
    from saintpipe.services.dataset.store import Dataset

log = logging.getLogger(__name__)

# spawn_key tag of the pre-sampling stream, so it never repeats a training job's subgraphs.
PRESAMPLE_STREAM = 0x5A1E7
ALPHA_MIN = 1e-4
ALPHA_UNSEEN = 10.0
UNSEEN_COUNT = 0.1
_REPORT_EVERY = 16
_FILES = ("loss_coefficients.npy", "aggregator_coefficients.npy")


@dataclass(frozen=True)
class Normalization:
    """Per-node loss coefficients and per-edge aggregator coefficients of one graph and sampler config."""

    loss_coefficients: np.ndarray  # float32 [N]
    aggregator_coefficients: np.ndarray  # float32 [E], alpha at full-graph CSR positions
    num_subgraphs: int = 0
    config_key: str = ""
    seed: int = 0

    def check_graph(self, num_nodes: int, num_edges: int) -> None:
        """Raise InvalidArgument unless the arrays fit a graph of this size."""
        if self.loss_coefficients.shape != (num_nodes,):
            raise InvalidArgument(f"normalization: loss_coefficients has shape "
                                  f"{self.loss_coefficients.shape}, the graph has {num_nodes} nodes")
        if self.aggregator_coefficients.shape != (num_edges,):
            raise InvalidArgument(f"normalization: aggregator_coefficients has shape "
                                  f"{self.aggregator_coefficients.shape}, the graph has {num_edges} edges")


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
    if train_nodes is None:
        mask = np.ones(num_nodes, dtype=bool)
    else:
        mask = train_mask(train_nodes, num_nodes).astype(bool)
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


def _train_digest(train_nodes: np.ndarray | None) -> str:
    if train_nodes is None:
        return "all"
    return hashlib.sha256(np.ascontiguousarray(train_nodes, dtype=np.int64).tobytes()).hexdigest()[:16]


def norm_dir(dataset_dir: Path | str, config: SamplerConfigModel) -> Path:
    """Where the normalization of ``config`` lives in a dataset directory."""
    return Path(dataset_dir) / "norm" / config_key(config)


def load_normalization(directory: Path) -> tuple[Normalization, dict]:
    """Read a stored normalization (memory-mapped) and its metadata.

    Raises:
        DatasetError: naming the file that is missing or unreadable.
    """
    meta_path = directory / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise DatasetError(f"{meta_path}: not found") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{meta_path}: unreadable: {exc}") from None
    arrays = []
    for name in _FILES:
        try:
            arrays.append(np.load(directory / name, mmap_mode="r", allow_pickle=False))
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{directory / name}: unreadable: {exc}") from None
    norm = Normalization(loss_coefficients=arrays[0], aggregator_coefficients=arrays[1],
                         num_subgraphs=int(meta["num_subgraphs"]), config_key=meta["config_key"],
                         seed=int(meta["seed"]))
    return norm, meta


def save_normalization(directory: Path, norm: Normalization, meta: dict) -> None:
    """Write ``norm`` to ``directory`` atomically: a temporary sibling renamed into place."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        np.save(tmp / _FILES[0], norm.loss_coefficients, allow_pickle=False)
        np.save(tmp / _FILES[1], norm.aggregator_coefficients, allow_pickle=False)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        os.chmod(tmp, 0o755)
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
            os.rename(directory, old)
            os.rename(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_or_estimate(dataset: "Dataset | Path | str", config: SamplerConfigModel, num_subgraphs: int, *,
                     seed: int = 0, processes: int | None = None,
                     train_nodes: np.ndarray | None = None) -> Normalization:
    """The dataset's stored normalization for ``config``, estimated and stored first if needed.

    Args:
        dataset: an opened :class:`~saintpipe.services.dataset.store.Dataset` or its directory.
        config: the sampler configuration (its :func:`config_key` names the stored copy).
        num_subgraphs, seed, processes: as for :func:`estimate_normalization`.
        train_nodes: default: the dataset's ``train`` split.

    A stored copy is reused when it was made with the same subgraph count, seed
    and training nodes; otherwise it is re-estimated and replaced. When the
    dataset directory is read-only the estimate is returned without storing it.
    """
    if not hasattr(dataset, "indptr"):
        from saintpipe.services.dataset.store import open_dataset

        dataset = open_dataset(dataset)
    if train_nodes is None:
        train_nodes = dataset.splits["train"]
    directory = norm_dir(dataset.path, config)
    wanted = {"config_key": config_key(config), "num_subgraphs": int(num_subgraphs), "seed": int(seed),
              "num_nodes": int(dataset.num_nodes), "num_edges": int(dataset.num_edges),
              "train_nodes": _train_digest(train_nodes)}
    if (directory / "meta.json").is_file():
        try:
            norm, meta = load_normalization(directory)
            if all(meta.get(k) == v for k, v in wanted.items()):
                log.info("reusing normalization %s", directory)
                return norm
            log.info("stored normalization %s was made with other settings; estimating again", directory)
        except DatasetError as exc:
            log.warning("ignoring unreadable normalization: %s", exc)
    norm = estimate_normalization(dataset.indptr, dataset.indices, config, num_subgraphs=num_subgraphs,
                                  train_nodes=train_nodes, seed=seed, processes=processes)
    meta = {**wanted, "config": config.model_dump(mode="json")}
    try:
        save_normalization(directory, norm, meta)
        log.info("stored normalization in %s", directory)
    except OSError as exc:
        log.warning("could not store normalization in %s (%s); using it unsaved", directory, exc)
    return norm


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
