"""The dataset manifest: shapes, dtypes, shard ranges and a checksum per file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

import pydantic

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.checks import class_limit

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


# The feature files' dtype and the graph samplers draw from by default (the fields below).
FeatureDtype = Literal["float32", "float16"]
SampleGraph = Literal["full", "train"]


class Manifest(pydantic.BaseModel):
    """What a dataset directory holds. Written last, so its presence means the dataset is complete."""

    model_config = pydantic.ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    name: str
    num_nodes: int = pydantic.Field(ge=1)
    num_edges: int = pydantic.Field(ge=0, description="directed edges stored (both directions of an undirected edge)")
    feature_dim: int = pydantic.Field(ge=1)
    feature_dtype: FeatureDtype = "float32"
    num_classes: int = pydantic.Field(ge=1)
    multilabel: bool = False
    symmetric: bool = True
    shards: list[tuple[int, int]] = pydantic.Field(description="[start, stop) node range of each feature shard file")
    files: dict[str, str] = pydantic.Field(description="relative path -> sha256 hex digest")
    source: str = ""
    sample_graph: SampleGraph = pydantic.Field(
        "full", description="the graph samplers draw from unless [samplers] graph says otherwise: the whole graph "
        "(transductive) or the graph induced by the training nodes (inductive, GraphSAINT's protocol); "
        "'train' datasets ship the training graph under train_graph/ (layout.TRAIN_GRAPH_FILES)")

    @property
    def num_shards(self) -> int:
        return len(self.shards)

    @pydantic.model_validator(mode="after")
    def _plausible_class_count(self) -> Manifest:
        # Trainers size their output layer by num_classes, so an absurd count in a hand-edited manifest
        # is refused when it is read. A writer never records more than class_limit(distinct labels),
        # and N nodes carry at most N distinct labels.
        if not self.multilabel and self.num_classes > class_limit(self.num_nodes):
            raise ValueError(f"num_classes is {self.num_classes:,} for {self.num_nodes:,} nodes; single-label "
                             f"datasets of that size have at most {class_limit(self.num_nodes):,} classes")
        return self


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def check_file(target: Path, digest: str, listed_by: str, recorded: str = "recorded",
               damage: str = "torn or was modified") -> None:
    """Raise DatasetError naming ``target`` when it is missing, or when its sha256 is not ``digest``.

    ``listed_by`` says what lists the file (for the not-found message), ``recorded`` where ``digest`` comes
    from, ``damage`` what a mismatch means.
    """
    if not target.is_file():
        raise DatasetError(f"{target}: file not found ({listed_by})")
    actual = sha256_file(target)
    if actual != digest:
        raise DatasetError(f"{target}: checksum mismatch ({recorded} {digest[:12]}…, file {actual[:12]}…): "
                           f"the file is {damage}")


def read_manifest(directory: Path) -> Manifest:
    """Read and validate ``DIR/manifest.json``.

    Raises:
        DatasetError: missing or unparsable manifest, or a format newer than this program reads.
    """
    path = Path(directory) / MANIFEST_NAME
    if not Path(directory).is_dir():
        raise DatasetError(f"{directory}: dataset directory not found")
    if not path.is_file():
        raise DatasetError(f"{path}: manifest not found (not a saintpipe dataset, or an unfinished write)")
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise DatasetError(f"{path}: manifest must be a JSON object")
    version = raw.get("format_version")
    if not isinstance(version, int):
        raise DatasetError(f"{path}: field format_version is missing or not an integer")
    if version > FORMAT_VERSION:
        raise DatasetError(
            f"{path}: format_version {version} is newer than this saintpipe reads ({FORMAT_VERSION}); upgrade saintpipe"
        )
    try:
        return Manifest.model_validate(raw)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        if not field:  # a check across fields: its message names them
            raise DatasetError(f"{path}: {err['ctx']['error'] if 'ctx' in err else err['msg']}") from None
        raise DatasetError(f"{path}: field {field}: {err['msg']}") from None


def write_manifest(directory: Path, manifest: Manifest) -> None:
    path = Path(directory) / MANIFEST_NAME
    path.write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n")
