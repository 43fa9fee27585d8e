"""Configuration of the trainer: the model (:class:`ModelConfig`) and the loop (:class:`TrainerConfig`).

Both sit on :class:`saintpipe.core.config.StrictModel`: unknown keys are errors and
:func:`saintpipe.core.config.load_config` names the file and field at fault. In a
shared config file the trainer reads the ``trainer`` section; the model is its
``model`` subsection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pydantic

from saintpipe.core.config import StrictModel

Arch = Literal["gcn", "sage", "gat", "mixhop"]
Order = Literal["auto", "ax_first", "xw_first"]
Activation = Literal["relu", "leaky_relu", "elu", "tanh", "identity"]


class ModelConfig(StrictModel):
    """The GNN: architecture, widths, regularization and the matmul-order policy."""

    arch: Arch = "sage"
    """gcn (eq. 4), sage (eq. 1, self || neighbour paths), gat (eqs. 6-7, multi-head), mixhop (eq. 5)."""
    hidden: list[pydantic.PositiveInt] = pydantic.Field(default_factory=lambda: [256, 256], min_length=1)
    """Output width of each graph layer (the number of entries is the depth). For sage and mixhop the
    width is split evenly between the concatenated paths; for gat between the heads."""
    dropout: float = pydantic.Field(0.1, ge=0.0, lt=1.0)
    """Dropout on the input of every graph layer and of the classifier."""
    activation: Activation = "relu"
    """Nonlinearity after every graph layer (ReLU in the paper)."""
    classifier_activation: Activation = "identity"
    """Nonlinearity on the classifier's output before softmax/sigmoid. Eq. 2 writes ReLU; the
    reference GraphSAINT code uses identity (a ReLU there can silence a class for good)."""
    heads: pydantic.PositiveInt = 4
    """Attention heads per gat layer."""
    negative_slope: float = pydantic.Field(0.2, ge=0.0, lt=1.0)
    """LeakyReLU slope of the gat attention scores (eq. 7)."""
    mixhop_powers: list[pydantic.NonNegativeInt] = pydantic.Field(
        default_factory=lambda: [0, 1, 2], min_length=1
    )
    """Adjacency powers k of a mixhop layer (eq. 5), e.g. [0, 1, 2]."""
    bias: bool = True
    """Add a bias to every weight transformation."""
    lr: float = pydantic.Field(0.01, gt=0.0)
    weight_decay: float = pydantic.Field(0.0, ge=0.0)
    order: Order = "auto"
    """Matmul order of every A·X·W product: auto (fewest multiply-accumulates, section 6.1), or forced
    to (A·X)·W (ax_first) or A·(X·W) (xw_first) in the forward pass and in both gradients."""

    @pydantic.field_validator("mixhop_powers")
    @classmethod
    def _distinct_powers(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"powers must be distinct, got {value}")
        return sorted(value)

    @pydantic.model_validator(mode="after")
    def _widths_divide(self) -> ModelConfig:
        parts = {"sage": 2, "gat": self.heads, "mixhop": len(self.mixhop_powers)}.get(self.arch, 1)
        for i, width in enumerate(self.hidden):
            if width % parts:
                raise ValueError(f"hidden[{i}]={width} must be divisible by {parts} for arch {self.arch}")
        return self


class TrainerConfig(StrictModel):
    """The training loop: length, evaluation, early stopping, checkpoints, data feeding."""

    model: ModelConfig = pydantic.Field(default_factory=ModelConfig)
    epochs: pydantic.PositiveInt = 50
    """Upper bound on epochs. One epoch = |train nodes| / mean labelled nodes per subgraph subgraphs."""
    max_steps: pydantic.NonNegativeInt = 0
    """Stop after this many optimizer steps (0: no limit)."""
    eval_every: pydantic.PositiveInt = 1
    """Validate every this many epochs."""
    eval_every_steps: pydantic.NonNegativeInt = 0
    """Also validate every this many steps (0: only at epoch ends)."""
    patience: pydantic.NonNegativeInt = 10
    """Stop after this many validations without improvement (0: never stop early)."""
    min_delta: float = pydantic.Field(0.0, ge=0.0)
    """Improvement smaller than this does not reset the patience counter."""
    eval_batch_nodes: pydantic.PositiveInt = 65_536
    """Output nodes per batch when evaluation runs layer by layer."""
    eval_full_graph_max_bytes: pydantic.PositiveInt = 2 << 30
    """Evaluate the whole graph in one forward pass when its estimated memory is below this."""
    checkpoint_dir: Path | None = None
    """Where checkpoints go (None: no checkpoints). A restarted trainer resumes from the latest."""
    checkpoint_every_steps: pydantic.NonNegativeInt = 50
    """Checkpoint every this many steps, besides each epoch end and the end (0: only those)."""
    seed: int = 0
    device: str = "auto"
    """torch device: auto (cuda when available), cpu, cuda, cuda:1, ..."""
    pool_timeout_s: float = pydantic.Field(30.0, gt=0.0)
    """How long a trainer waits for a subgraph before giving up."""
    prefetch: bool = True
    """Fetch the next subgraph's features while the current step computes."""
    threads: pydantic.NonNegativeInt = 0
    """torch intra-op threads (0: torch's default)."""
    feature_retry_deadline_s: float = pydantic.Field(60.0, ge=0.0)
    """How long a feature gather retries while no replica of a shard answers (a shard restarting) before
    the trainer fails (docs/reliability.md)."""
    feature_shared_memory: Literal["auto", "on", "off"] = "auto"
    """Feature rows through same-host shared memory (FeatureClient ``shared_memory``): auto = where the
    shard servers share this host's /dev/shm, bytes over gRPC elsewhere; on = require it; off = never."""
