"""Using a run's model: open it with its dataset, read node lists, predict labels (``saintpipe predict``/``embed``).

The model file says what it was trained on (:class:`~saintpipe.trainer.run_dir.model_file.DatasetInfo`); a
dataset given with ``--data`` must have the same features and label kind. Another graph with those is
allowed (GraphSAGE-style models apply to nodes they never saw), with a warning.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from saintpipe.core.errors import ConfigError, DatasetError, InvalidArgument
from saintpipe.pipeline.timeline import Timeline
from saintpipe.trainer.inference import InferenceLimits, LayerwiseInference
from saintpipe.trainer.run_dir.model_file import DatasetInfo, SavedModel, load_model

if TYPE_CHECKING:
    import torch

    from saintpipe.services.dataset.store import Dataset

log = logging.getLogger(__name__)

SPLIT_NAMES = ("train", "val", "test")
# A node file is read whole: past this it is not a list of node ids (a dataset file, a device).
MAX_NODE_FILE_BYTES = 1 << 30


@dataclass
class Session:
    """A loaded model and the dataset it runs on."""

    saved: SavedModel
    dataset: Dataset
    which: str
    limits: InferenceLimits
    device: torch.device
    timeline: Timeline  # when the model and the dataset were ready, since the command started
    progress: bool = False

    def inference(self) -> LayerwiseInference:
        from saintpipe.trainer.evaluate import EvalGraph

        return LayerwiseInference(self.saved.model, EvalGraph.from_dataset(self.dataset), self.limits,
                                  device=self.device, progress=self.progress)

    def timings(self) -> str:
        """Seconds since the command started, now and when the model and the dataset were ready (the
        command's last line)."""
        marks, done = self.timeline.marks, time.time() - self.timeline.origin
        return f"in {done:.1f} s (model ready at {marks['model']:.1f} s, dataset at {marks['dataset']:.1f} s)"


def open_session(run_dir: Path, which: str, data: Path | None, limits: InferenceLimits,
                 device: str = "cpu", timeline: Timeline | None = None) -> Session:
    """The model ``which`` (best, final) of ``run_dir`` with its dataset (``data`` or the one it was trained on);
    ``timeline`` (default: a new one, from the command's start) gets when each became ready.

    Raises:
        ConfigError: no such run directory or model; the trained-on dataset is gone and no ``data`` was given.
        DatasetError: the model file is unreadable, or ``data`` does not fit the model (features, labels).
    """
    from saintpipe.core.bars import is_terminal
    from saintpipe.pipeline.run_dir import model_path
    from saintpipe.services.dataset.store import open_dataset
    from saintpipe.trainer.assemble import pick_device

    timeline = timeline or Timeline()
    path = model_path(run_dir, which)
    torch_device = pick_device(device)
    saved = load_model(path, torch_device)
    timeline.mark("model", detail=str(path))
    data_dir = data if data is not None else _trained_on(saved, path)
    dataset = open_dataset(data_dir)
    timeline.mark("dataset", detail=str(data_dir))
    info = DatasetInfo.from_dataset(dataset)
    why = saved.dataset.incompatible(info)
    if why:
        raise DatasetError(f"{data_dir}: does not fit the model: {why} ({path} was trained on "
                           f"{saved.dataset.name!r})")
    if not saved.dataset.same_graph(info):
        log.warning("%s: the model was trained on %r (%d nodes, %d edges), this is %r (%d nodes, %d edges): "
                    "predicting for a graph it never saw", data_dir, saved.dataset.name, saved.dataset.num_nodes,
                    saved.dataset.num_edges, info.name, info.num_nodes, info.num_edges)
    return Session(saved=saved, dataset=dataset, which=which, limits=limits, device=torch_device,
                   progress=is_terminal(sys.stderr), timeline=timeline)


def _trained_on(saved: SavedModel, path: Path) -> Path:
    where = Path(saved.dataset.path) if saved.dataset.path else None
    if where is None or not (where / "manifest.json").is_file():
        raise ConfigError(f"{path}: the dataset it was trained on ({saved.dataset.name!r} at "
                          f"{saved.dataset.path or 'an unknown place'}) is not there; pass --data DATASET")
    return where


def read_nodes(spec: str, dataset) -> np.ndarray:
    """The node ids ``--nodes`` names (int64, in the order given): a split name, a file, or ``3,17,42``.

    Raises:
        InvalidArgument: one line: a token that is not an id (with the file and line), an id out of range.
    """
    if spec in SPLIT_NAMES:
        return np.array(dataset.splits[spec], dtype=np.int64)
    path = Path(spec)
    if path.is_file():
        ids = _read_node_file(path)
        where = f"--nodes {path}"
    else:
        if not re.fullmatch(r"\s*-?\d+(\s*,\s*-?\d+)*\s*,?\s*", spec):
            raise InvalidArgument(f"--nodes {spec!r}: neither a split name ({', '.join(SPLIT_NAMES)}), a file, nor "
                                  "comma-separated node ids such as 3,17,42")
        ids = np.array([int(t) for t in spec.split(",") if t.strip()], dtype=np.int64)
        where = "--nodes"
    n = dataset.num_nodes
    bad = np.flatnonzero((ids < 0) | (ids >= n))
    if bad.size:
        raise InvalidArgument(f"{where}: node id {int(ids[bad[0]])} out of range (the dataset has {n:,} nodes, ids "
                              f"0 to {n - 1:,}); {bad.size:,} id(s) out of range in all")
    if ids.size == 0:
        raise InvalidArgument(f"{where}: no node ids")
    return ids


ORIGINAL_IDS_FILE = "node_ids.npy"


def original_ids(dataset) -> np.ndarray:
    """The ids nodes had in the imported file (``node_ids.npy``, row i = node i's), read-only.

    Raises:
        InvalidArgument: the dataset keeps none (only edge-list imports write them).
    """
    path = Path(dataset.path) / ORIGINAL_IDS_FILE
    if not path.is_file():
        raise InvalidArgument(f"--original-ids: {dataset.path} keeps no original ids (no {ORIGINAL_IDS_FILE}: only "
                              "`saintpipe data import` of an edge list writes them)")
    return np.load(path, mmap_mode="r", allow_pickle=False)


def map_original_ids(tokens: list[str], known: np.ndarray, where: str) -> np.ndarray:
    """The node ids (int64) of ``tokens``, ids as the imported edge list wrote them (strings or integers),
    ``known`` being :func:`original_ids`.

    One sort of the id column, then a binary search per token: no per-node Python object.

    Raises:
        InvalidArgument: a token that is no node's original id, named with ``where``.
    """
    if np.issubdtype(known.dtype, np.integer):
        try:
            wanted = np.array([int(t) for t in tokens], dtype=np.int64)
        except ValueError:
            bad = next(t for t in tokens if not t.lstrip("-").isdigit())
            raise InvalidArgument(f"{where}: {bad[:40]!r} is not an original id (this dataset's are integers)") from None
    else:
        wanted = np.array(tokens, dtype=known.dtype if len(tokens) else str)
    order = np.argsort(known, kind="stable")
    at = np.searchsorted(known, wanted, sorter=order)
    at = np.minimum(at, known.size - 1)
    found = known[order[at]] == wanted
    if not found.all():
        missing = tokens[int(np.flatnonzero(~found)[0])]
        raise InvalidArgument(f"{where}: {missing[:40]!r} is no node's original id ({int((~found).sum()):,} of "
                              f"{len(tokens):,} not found)")
    return order[at].astype(np.int64)


def read_original_nodes(spec: str, known: np.ndarray) -> np.ndarray:
    """``--nodes`` as original ids (``known``: :func:`original_ids`): comma-separated, or a text file with ids
    separated by spaces, commas or lines."""
    path = Path(spec)
    if path.is_file():
        tokens, where = _read_node_text(path).replace(",", " ").split(), f"--nodes {path}"
    else:
        tokens, where = [t.strip() for t in spec.split(",") if t.strip()], "--nodes"
    if not tokens:
        raise InvalidArgument(f"{where}: no node ids")
    return map_original_ids(tokens, known, where)


def _read_node_text(path: Path) -> str:
    """A text file of node ids, capped at ``MAX_NODE_FILE_BYTES``; errors name the file."""
    from saintpipe.core.files import TooLarge, read_capped

    try:
        return read_capped(path, MAX_NODE_FILE_BYTES).decode("utf-8")
    except TooLarge:
        raise InvalidArgument(f"--nodes {path}: larger than {MAX_NODE_FILE_BYTES >> 20} MiB, not a node list") from None
    except UnicodeDecodeError:
        raise InvalidArgument(f"--nodes {path}: not a text file of node ids (nor .npy)") from None


def _read_node_file(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        try:
            ids = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InvalidArgument(f"--nodes {path}: not a readable .npy file ({exc})") from None
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise InvalidArgument(f"--nodes {path}: expected a 1-D integer array, got {ids.dtype} {ids.shape}")
        return ids.astype(np.int64)
    text = _read_node_text(path)
    numbers: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for token in line.replace(",", " ").split():
            try:
                numbers.append(int(token))
            except ValueError:
                raise InvalidArgument(f"--nodes {path}: line {number}: {token[:40]!r} is not a node id") from None
    return np.array(numbers, dtype=np.int64)


def predict_labels(inference: LayerwiseInference, multilabel: bool, nodes: np.ndarray | None = None) -> np.ndarray:
    """Predicted labels of ``nodes`` (default: all, in id order): class ids (int64 [n]), or 0/1 rows
    (uint8 [n, C], a label where its logit is above 0, i.e. sigmoid above 0.5) for multi-label models."""
    logits = inference.logits()
    if nodes is not None:
        logits = logits[nodes]
    return (logits > 0).astype(np.uint8) if multilabel else logits.argmax(1).astype(np.int64)
