"""Configuration of the trainer: the model (:class:`ModelConfig`) and the loop (:class:`TrainerConfig`).

Both sit on :class:`saintpipe.core.config.StrictModel`: unknown keys are errors and
:func:`saintpipe.core.config.load_config` names the file and field at fault. In a
shared config file the trainer reads the ``trainer`` section; the model is its
``model`` subsection.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pydantic

from saintpipe.core.config import StrictModel
from saintpipe.core.seeds import Seed

if TYPE_CHECKING:
    from saintpipe.services.feature_shard.security import ClientSecurity

# Bounds far past any real run; they keep a typo (or 10**30) from overflowing numpy and torch.
MAX_STEPS = 10**9
Width = Annotated[int, pydantic.Field(ge=1, le=2**20)]

Arch = Literal["gcn", "sage", "gat", "mixhop"]
Order = Literal["auto", "ax_first", "xw_first"]
Activation = Literal["relu", "leaky_relu", "elu", "tanh", "identity"]


class ModelConfig(StrictModel):
    """The GNN: architecture, widths, regularization and the matmul-order policy."""

    arch: Arch = "sage"
    """gcn (eq. 4), sage (eq. 1, self || neighbour paths), gat (eqs. 6-7, multi-head), mixhop (eq. 5)."""
    hidden: list[Width] = pydantic.Field(default_factory=lambda: [256, 256], min_length=1, max_length=64)
    """Output width of each graph layer (the number of entries is the depth). For sage and mixhop the
    width is split evenly between the concatenated paths; for gat between the heads."""
    dropout: float = pydantic.Field(0.1, ge=0.0, lt=1.0)
    """Dropout on the input of every graph layer and of the classifier."""
    activation: Activation = "relu"
    """Nonlinearity after every graph layer (ReLU in the paper)."""
    classifier: Literal["dense", "graph"] = "dense"
    """The output layer: dense is eq. 2's X⁽ᴸ⁾·W_MLP (GraphSAINT); graph propagates it once more,
    Â·X⁽ᴸ⁾·W_MLP, the GCN paper's output layer (Kipf and Welling's two-layer GCN is gcn, hidden [16],
    classifier graph). On CiteSeer it is worth 2.4 to 3.8 points of test accuracy
    (docs/benchmarks/accuracy.md)."""
    classifier_activation: Activation = "identity"
    """Nonlinearity on the classifier's output before softmax/sigmoid. Eq. 2 writes ReLU; the
    reference GraphSAINT code uses identity (a ReLU there can silence a class for good)."""
    heads: int = pydantic.Field(4, ge=1, le=1024)
    """Attention heads per gat layer."""
    negative_slope: float = pydantic.Field(0.2, ge=0.0, lt=1.0)
    """LeakyReLU slope of the gat attention scores (eq. 7)."""
    mixhop_powers: list[Annotated[int, pydantic.Field(ge=0, le=64)]] = pydantic.Field(
        default_factory=lambda: [0, 1, 2], min_length=1, max_length=65
    )
    """Adjacency powers k of a mixhop layer (eq. 5), e.g. [0, 1, 2]."""
    bias: bool = True
    """Add a bias to every weight transformation."""
    lr: float = pydantic.Field(0.01, gt=0.0)
    """Adam's learning rate."""
    weight_decay: float = pydantic.Field(0.0, ge=0.0)
    """Adam's L2 penalty on every weight (0: none)."""
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

    # A field's docstring is its description: the help of its flag (serve trainer, saintpipe.core.model_flags).
    # Only here: reading the docstrings costs an inspect of the source per model at import.
    model_config = pydantic.ConfigDict(use_attribute_docstrings=True)

    model: ModelConfig = pydantic.Field(default_factory=ModelConfig)
    epochs: int = pydantic.Field(50, ge=1, le=1_000_000)
    """Upper bound on epochs. One epoch = |train nodes| / mean labelled nodes per subgraph subgraphs."""
    max_steps: int = pydantic.Field(0, ge=0, le=MAX_STEPS)
    """Stop after this many optimizer steps (0: no limit)."""
    eval_every: int = pydantic.Field(1, ge=1, le=1_000_000)
    """Validate every this many epochs."""
    eval_every_steps: int = pydantic.Field(0, ge=0, le=MAX_STEPS)
    """Also validate every this many steps (0: only at epoch ends)."""
    patience: int = pydantic.Field(10, ge=0, le=1_000_000)
    """Stop after this many validations without improvement (0: never stop early)."""
    min_delta: float = pydantic.Field(0.0, ge=0.0)
    """Improvement smaller than this does not reset the patience counter."""
    eval_batch_nodes: int = pydantic.Field(65_536, ge=1, le=2**31 - 1)
    """Output nodes per batch when evaluation runs layer by layer."""
    eval_full_graph_max_bytes: int = pydantic.Field(2 << 30, ge=1, le=2**50)
    """Evaluate the whole graph in one forward pass when its estimated memory is below this."""
    checkpoint_dir: Path | None = None
    """Where checkpoints go (None: no checkpoints). A restarted trainer resumes from the latest."""
    checkpoint_every_steps: int = pydantic.Field(50, ge=0, le=MAX_STEPS)
    """Checkpoint every this many steps, besides each epoch end and the end (0: only those)."""
    seed: Seed = 0
    """Seed of the model's initialization and dropout."""
    device: str = "auto"
    """torch device: auto (cuda when available), cpu, cuda, cuda:1, ..."""
    pool_timeout_s: float = pydantic.Field(30.0, gt=0.0, le=86_400)
    """How long a trainer waits for a subgraph before giving up."""
    prefetch: bool = True
    """Fetch the next subgraph's features while the current step computes."""
    sample_graph: Literal["auto", "full", "train"] = "auto"
    """The graph the samplers draw from (their ``[samplers] graph``; ``saintpipe run`` sets it from there):
    training batches mix in each node's self-loop by its degree in that graph, the training graph's for
    ``train`` (evaluation always uses the full graph's). auto: the dataset manifest's ``sample_graph``."""
    threads: int = pydantic.Field(0, ge=0, le=4096)
    """torch intra-op threads (0: torch's default)."""
    feature_retry_deadline_s: float = pydantic.Field(60.0, ge=0.0, le=86_400)
    """How long a feature gather retries while no replica of a shard answers (a shard restarting) before
    the trainer fails (docs/how-to/faults.md)."""
    feature_shared_memory: Literal["auto", "on", "off"] = "auto"
    """Feature rows through same-host shared memory (FeatureClient ``shared_memory``): auto = where the
    shard servers share this host's /dev/shm, bytes over gRPC elsewhere; on = require it; off = never."""
    feature_tls_ca: Path | None = None
    """PEM CA bundle that signed the feature shards' certificates: talk TLS to them (None: plaintext)."""
    feature_tls_cert: Path | None = None
    """PEM client certificate, for shards that require one (mutual TLS; with feature_tls_key)."""
    feature_tls_key: Path | None = None
    """PEM private key of feature_tls_cert."""
    feature_tls_server_name: str | None = pydantic.Field(None, min_length=1)
    """Name to expect on the shards' certificates when it is not the host of their addresses."""
    feature_token_file: Path | None = None
    """File holding the feature shards' token (None: the SAINTPIPE_FEATURE_TOKEN environment variable of
    the trainer process, if set; neither: no token)."""

    def feature_security(self) -> ClientSecurity:
        """The feature client's :class:`~saintpipe.services.feature_shard.security.ClientSecurity` from the
        ``feature_tls_*``/``feature_token_file`` fields (the token from the environment when no file is set)."""
        from saintpipe.services.feature_shard.security import ClientSecurity

        fields = ("tls_ca", "tls_cert", "tls_key", "tls_server_name", "token_file")
        security = ClientSecurity(**{f: getattr(self, f"feature_{f}") for f in fields})
        security.named({f: f"trainer.feature_{f} (--feature-{f.replace('_', '-')})" for f in fields})
        return security.with_env_token()

    def feed_options(self) -> dict[str, Any]:
        """What a consumer's :class:`~saintpipe.minibatch.inputs.PoolInputs` takes from these settings: the
        feature client's transport, retry deadline and security, and prefetching."""
        return {"shared_memory": self.feature_shared_memory, "retry_deadline_s": self.feature_retry_deadline_s,
                "security": self.feature_security(), "prefetch": self.prefetch}
