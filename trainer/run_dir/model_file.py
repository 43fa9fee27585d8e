"""A trained model on disk: its weights and everything needed to build it again (``best.pt``, ``final.pt``).

A model file is a ``torch.save`` of plain data and tensors only, so it loads with ``weights_only=True`` (a
file that asks the unpickler for more is refused, as checkpoints are)::

    {"format": "saintpipe-model", "version": 1,
     "state_dict": {...},                        # the GNN's tensors
     "model": {"config": {...ModelConfig...}, "in_dim": F, "num_classes": C, "multilabel": false},
     "dataset": {"name", "num_nodes", "num_edges", "feature_dim", "num_classes", "multilabel", "path"},
     "meta": {"which": "best", "step": 120, "epoch": 4.0, "val_score": 0.83, "test_score": 0.82, ...}}

Unlike a checkpoint (optimizer, early-stopping state, records: what resuming needs), it holds only the model,
and it is what ``saintpipe predict`` and ``saintpipe embed`` read.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from saintpipe.core.errors import DatasetError
from saintpipe.core.files import write_atomic
from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.models import GNN, build_model

FORMAT = "saintpipe-model"
VERSION = 1


@dataclass(frozen=True)
class DatasetInfo:
    """The dataset a model was trained on, as far as using the model needs to know it."""

    name: str
    num_nodes: int
    num_edges: int
    feature_dim: int
    num_classes: int
    multilabel: bool
    path: str = ""

    @classmethod
    def from_dataset(cls, dataset) -> DatasetInfo:
        """From an opened :class:`saintpipe.services.dataset.store.Dataset`."""
        m = dataset.manifest
        return cls(name=m.name, num_nodes=m.num_nodes, num_edges=m.num_edges, feature_dim=m.feature_dim,
                   num_classes=m.num_classes, multilabel=m.multilabel, path=str(Path(dataset.path).resolve()))

    @property
    def metric(self) -> str:
        """What validation and test scores are: accuracy, or F1-micro for multi-label data."""
        return "F1-micro" if self.multilabel else "accuracy"

    @property
    def label_kind(self) -> str:
        return "multi-label" if self.multilabel else "single-label"

    def incompatible(self, other: DatasetInfo) -> str:
        """Why a model trained on ``self`` cannot run on ``other`` ("" when it can): the features it reads
        and the labels it predicts must be the same kind. A different graph is allowed (inductive use)."""
        if other.feature_dim != self.feature_dim:
            return f"{other.feature_dim} feature columns, the model reads {self.feature_dim}"
        if other.multilabel != self.multilabel:
            return f"{other.label_kind} labels, the model predicts {self.label_kind} ones"
        if other.num_classes != self.num_classes:
            return f"{other.num_classes} classes, the model predicts {self.num_classes}"
        return ""

    def same_graph(self, other: DatasetInfo) -> bool:
        return (self.name, self.num_nodes, self.num_edges) == (other.name, other.num_nodes, other.num_edges)


@dataclass
class SavedModel:
    """A loaded model file: the model (eval mode), its dataset and what the run said about it."""

    model: GNN
    dataset: DatasetInfo
    meta: dict = field(default_factory=dict)
    path: Path | None = None


def save_model(path: Path | str, model: GNN, dataset: DatasetInfo, **meta: object) -> Path:
    """Write ``model`` with what rebuilds it to ``path``, atomically. ``meta``: plain values (NaN -> None)."""
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "state_dict": state,
        "model": {"config": model.config.model_dump(mode="json"), "in_dim": model.in_dim,
                  "num_classes": model.num_classes, "multilabel": model.multilabel},
        "dataset": asdict(dataset),
        "meta": {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in meta.items()},
    }
    return write_atomic(path, lambda fh: torch.save(payload, fh))


def load_model(path: Path | str, device: torch.device | str = "cpu") -> SavedModel:
    """Read a model file and rebuild its model (in eval mode, on ``device``).

    Raises:
        DatasetError: one line naming the file: missing, unreadable, refused (it holds more than weights
            and plain data), or not a saintpipe model file.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no model file there")
    try:
        data = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError:
        raise DatasetError(f"{path}: refused: it holds Python objects other than tensors and plain data; "
                           "saintpipe never writes such a model file") from None
    except Exception as exc:  # noqa: BLE001 - torn, foreign or not a torch file at all: say which file
        raise DatasetError(f"{path}: unreadable model file ({' '.join(str(exc).split())[:200]})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DatasetError(f"{path}: not a saintpipe model file (a checkpoint or another tool's file?)")
    if data.get("version") != VERSION:
        raise DatasetError(f"{path}: model file version {data.get('version')!r}, this saintpipe reads {VERSION}")
    try:
        spec = data["model"]
        model = build_model(ModelConfig.model_validate(spec["config"]), int(spec["in_dim"]),
                            int(spec["num_classes"]), bool(spec["multilabel"]))
        model.load_state_dict(data["state_dict"])
        dataset = DatasetInfo(**data["dataset"])
    except Exception as exc:  # noqa: BLE001 - a hand-edited or damaged file: one line, not a traceback
        raise DatasetError(f"{path}: damaged model file ({' '.join(str(exc).split())[:200]})") from None
    return SavedModel(model=model.to(device).eval(), dataset=dataset, meta=dict(data.get("meta") or {}), path=path)
